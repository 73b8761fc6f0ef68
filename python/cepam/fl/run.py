"""What every engine of a federated-learning run shares: the data as tensors,
the split into clients, the initial model, the learning-rate schedule and the
result (:mod:`.engines` runs them; :mod:`.rundir` writes them)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import FLConfig
from .data import MNIST, normalize
from .models import build_model
from .seeds import derive_seed, numpy_rng
from .split import split_clients, train_validation_split
from .training import ClientData

__all__ = ["TensorMNIST", "PlateauSchedule", "RunResult", "prepare", "initial_params"]


class TensorMNIST:
    """MNIST as normalised float32 tensors, built once and shared by runs."""

    def __init__(self, mnist: MNIST) -> None:
        self.train_x = normalize(mnist.train_images)
        self.train_y = torch.from_numpy(np.ascontiguousarray(mnist.train_labels))
        self.test_x = normalize(mnist.test_images)
        self.test_y = torch.from_numpy(np.ascontiguousarray(mnist.test_labels))


class PlateauSchedule:
    """Learning rate multiplied by ``factor`` after ``patience`` consecutive
    rounds without a new best validation accuracy."""

    def __init__(self, lr: float, patience: int, factor: float) -> None:
        self.lr, self.patience, self.factor = float(lr), int(patience), float(factor)
        self.best = -math.inf
        self.bad_rounds = 0

    def step(self, val_acc: float) -> None:
        if val_acc > self.best:
            self.best, self.bad_rounds = val_acc, 0
            return
        self.bad_rounds += 1
        if self.bad_rounds >= self.patience:
            self.lr *= self.factor
            self.bad_rounds = 0

    def state_dict(self) -> dict[str, float]:
        return {"lr": self.lr, "best": self.best, "bad_rounds": self.bad_rounds}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.lr, self.best = float(state["lr"]), float(state["best"])
        self.bad_rounds = int(state["bad_rounds"])


@dataclass
class RunResult:
    """What a run produced: its configuration, rows and final global weights."""

    config: FLConfig
    rows: list[dict[str, Any]]
    params: dict[str, torch.Tensor]
    directory: Path | None = None
    complete: bool = True
    resumed_from: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> dict[str, Any]:
        return self.rows[-1]


def prepare(data: TensorMNIST, config: FLConfig) -> dict[str, Any]:
    """The run's data: ``clients`` (:class:`~.training.ClientData`, the
    training indices of each of the ``population_size`` clients), ``val_x``/``val_y`` and
    ``test_x``/``test_y`` (tensors), drawn from ``config.seed``."""
    n = len(data.train_y)
    train_idx, val_idx = train_validation_split(n, config.train_size, config.val_size,
                                                numpy_rng(config.seed, "split"))
    parts = split_clients(data.train_y.numpy()[train_idx], config.population_size,
                          numpy_rng(config.seed, "clients"), alpha=config.alpha,
                          per_client=config.samples_per_client)
    clients = ClientData([train_idx[p] for p in parts])
    n_test = len(data.test_y) if config.test_size is None else config.test_size
    val = torch.from_numpy(val_idx)
    return {
        "clients": clients,
        "val_x": data.train_x[val], "val_y": data.train_y[val],
        "test_x": data.test_x[:n_test], "test_y": data.test_y[:n_test],
    }


def initial_params(config: FLConfig) -> dict[str, torch.Tensor]:
    """The initial global weights (parameter name -> tensor), from ``config.seed``."""
    model = build_model(config.model, derive_seed(config.seed, "init"))
    return {n: p.detach().clone() for n, p in model.named_parameters()}
