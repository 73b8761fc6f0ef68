"""The model, the data and the local training of the example.

The CNN of the paper's MNIST experiments (``cepam.fl.models.CNN``, 6,422
parameters); the 50,000 training images (of the official 60,000, the rest
kept for validation) split IID into ``num-clients`` shares with a seeded
generator; each round a client runs ``sgd-steps`` single-sample
momentum-SGD steps on samples drawn with replacement from its share (the
setting ``cepam.accounting`` accounts).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from cepam.fl.data import load_mnist, normalize
from cepam.fl.models import build_model
from cepam.fl.split import iid_split, train_validation_split

TRAIN, VALIDATION = 50000, 10000


def data_dir(configured: str) -> str:
    """The MNIST folder: the run config's ``data-dir``, else ``$CEPAM_DATA``,
    else ``../shared/data/mnist`` (from the working directory)."""
    for candidate in (configured, os.environ.get("CEPAM_DATA", "")):
        if candidate:
            return candidate
    return str(Path("../shared/data/mnist").resolve())


@lru_cache(maxsize=1)
def mnist(folder: str):
    """(train images, train labels, test images, test labels) as tensors."""
    raw = load_mnist(folder)
    return (normalize(raw.train_images), torch.from_numpy(raw.train_labels.astype(np.int64)),
            normalize(raw.test_images), torch.from_numpy(raw.test_labels.astype(np.int64)))


@lru_cache(maxsize=1)
def shares(folder: str, clients: int, seed: int) -> list[np.ndarray]:
    """Each client's indices into the training images."""
    rng = np.random.default_rng(seed)
    train_idx, _ = train_validation_split(60000, TRAIN, VALIDATION, rng)
    return [train_idx[p] for p in iid_split(len(train_idx), clients, rng)]


def model(seed: int) -> torch.nn.Module:
    """The paper's CNN with its seeded initial weights."""
    return build_model("cnn", seed)


def train(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, steps: int, lr: float,
          momentum: float, generator: torch.Generator) -> float:
    """``steps`` single-sample SGD steps on samples drawn with replacement;
    returns the mean loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    net.train()
    total = 0.0
    for i in torch.randint(0, len(y), (steps,), generator=generator):
        opt.zero_grad()
        loss = F.cross_entropy(net(x[i:i + 1]), y[i:i + 1])
        loss.backward()
        opt.step()
        total += loss.item()
    return total / steps


@torch.inference_mode()
def accuracy(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy."""
    net.eval()
    return float((net(x).argmax(1) == y).double().mean())
