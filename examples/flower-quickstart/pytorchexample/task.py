"""The model and data: a small CNN with BatchNorm on MNIST (read from
``data-dir`` or ``$CEPAM_DATA``), split into equal partitions."""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from cepam.fl.data import load_mnist, normalize


class Net(nn.Module):
    """Conv-BatchNorm-ReLU twice, then a linear layer (BatchNorm: float running
    statistics and an integer ``num_batches_tracked`` in the state_dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


@lru_cache(maxsize=1)
def _mnist(folder: str):
    raw = load_mnist(folder or os.environ.get("CEPAM_DATA") or None)
    return (normalize(raw.train_images), torch.from_numpy(raw.train_labels.astype(np.int64)),
            normalize(raw.test_images), torch.from_numpy(raw.test_labels.astype(np.int64)))


def load_data(partition_id: int, num_partitions: int, batch_size: int, *, train_size: int,
              folder: str = "") -> tuple[DataLoader, DataLoader]:
    """This partition's train and test loaders."""
    x, y, x_test, y_test = _mnist(folder)
    part = np.array_split(np.arange(train_size), num_partitions)[partition_id]
    test = np.array_split(np.arange(len(y_test)), num_partitions)[partition_id]
    return (DataLoader(TensorDataset(x[part], y[part]), batch_size=batch_size, shuffle=True),
            DataLoader(TensorDataset(x_test[test], y_test[test]), batch_size=256))


def train(net: Net, loader: DataLoader, epochs: int, lr: float) -> float:
    """Trains in place; returns the mean training loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    net.train()
    total, batches = 0.0, 0
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            total, batches = total + loss.item(), batches + 1
    return total / max(batches, 1)


@torch.inference_mode()
def test(net: Net, loader: DataLoader) -> tuple[float, float]:
    """(mean loss, accuracy)."""
    net.eval()
    loss, correct, n = 0.0, 0, 0
    for x, y in loader:
        out = net(x)
        loss += F.cross_entropy(out, y, reduction="sum").item()
        correct += int((out.argmax(1) == y).sum())
        n += len(y)
    return loss / n, correct / n
