"""The configuration of one federated-learning run, and the names it accepts.

:class:`FLConfig` fixes a run (its defaults are the paper's setup, see
``docs/design.md``, "The paper's experiment"); :data:`METHODS` and
:data:`MODEL_NAMES` are the transports and networks a configuration may name,
and :func:`method_label` gives a method's name in the paper.  This module
needs no torch, so finished runs can be read and tabulated without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..lattices import LATTICE_DIMS
from .engines import ENGINES as _ENGINE_TABLE

__all__ = ["FLConfig", "METHODS", "MODEL_NAMES", "MODEL_PARAMETERS", "method_label", "json_value"]

#: The networks of :mod:`.models`, by name.
MODEL_NAMES = ("mlp", "cnn")
#: Their parameter counts (the coordinates of an update), known without torch.
MODEL_PARAMETERS = {"mlp": 25818, "cnn": 6422}

METHODS = (
    "fl",
    "fl-sdq",
    "fl-gaussian",
    "fl-gaussian-sdq",
    "fl-laplace",
    "fl-laplace-sdq",
    "cepam-gaussian",
    "cepam-laplace",
)

_LABELS = {
    "fl": "FL",
    "fl-sdq": "FL+SDQ",
    "fl-gaussian": "FL+Gaussian",
    "fl-gaussian-sdq": "FL+Gaussian+SDQ",
    "fl-laplace": "FL+Laplace",
    "fl-laplace-sdq": "FL+Laplace+SDQ",
    "cepam-gaussian": "CEPAM-Gaussian",
    "cepam-laplace": "CEPAM-Laplace",
}


def method_label(method: str, dim: int = 1, lattice: str = "Z") -> str:
    """The paper's name, e.g. ``CEPAM-Gaussian (n=2)``."""
    label = _LABELS[method]
    if method.startswith("cepam"):
        # A2, D4 and E8 have a fixed dimension: the lattice names it.
        label += f" (n={dim})" if lattice == "Z" else f" ({lattice})"
    return label


# The names of the engines (:mod:`.engines` holds what each one is).
ENGINES = tuple(_ENGINE_TABLE)


@dataclass(frozen=True)
class FLConfig:
    """The settings of one run; the defaults are the paper's (docs/design.md,
    "The paper's experiment").

    Attributes:
        model: "mlp" or "cnn".
        method: one of :data:`cepam.fl.methods.METHODS`.
        dim, lattice: LRSUQ sub-vector dimension and lattice (CEPAM methods).
        sigma: Gaussian noise standard deviation per coordinate.
        b: Laplace scale per coordinate.
        sdq_step: SDQ step (None: sqrt(12) times the noise std).
        clip: whole-update l2 clip gamma of the private methods.
        clip_all: also clip ``fl`` and ``fl-sdq``.
        clients: K.
        samples_per_client: IID share size (None: train_size // K).
        alpha: Dirichlet concentration of a non-IID split (None: IID).
        sgd_steps: local optimizer (momentum-SGD) steps per client and
            round (the paper's tau: 15).  Each draws ``batch_size`` samples
            with replacement, so a round draws ``sgd_steps * batch_size``
            samples: the accountant's
            :attr:`cepam.accounting.FLSetting.samples_per_round`.
        batch_size: samples per local step (the paper: 1).
        lr, momentum: SGD settings.
        lr_patience, lr_factor: plateau schedule on validation accuracy.
        rounds: communication rounds.
        train_size, val_size: split of the 60,000 official training images.
        test_size: number of official test images used (None: all 10,000).
        delta: delta of the "eps so far" column.
        seed: the run's seed; every random draw derives from it.
        engine: "builtin" (all clients trained together in one process) or
            "flower" (Flower's simulation engine, one ClientApp call per
            client: :mod:`.flower_engine`).
    """

    model: str = "cnn"
    method: str = "fl"
    dim: int = 1
    lattice: str = "Z"
    sigma: float = 1e-3
    b: float = 1e-3
    sdq_step: float | None = None
    clip: float = 1.0
    clip_all: bool = False
    clients: int = 30
    samples_per_client: int | None = None
    alpha: float | None = None
    sgd_steps: int = 15
    batch_size: int = 1
    lr: float = 0.01
    momentum: float = 0.9
    lr_patience: int = 10
    lr_factor: float = 0.5
    rounds: int = 80
    train_size: int = 50000
    val_size: int = 10000
    test_size: int | None = None
    delta: float = 1e-5
    seed: int = 0
    engine: str = "builtin"

    def __post_init__(self) -> None:
        if self.model not in MODEL_NAMES:
            raise InvalidArgumentError(f"model must be one of {sorted(MODEL_NAMES)}, got {self.model!r}")
        if self.method not in METHODS:
            raise InvalidArgumentError(
                f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name in ("clients", "sgd_steps", "batch_size", "lr_patience", "train_size"):
            if int(getattr(self, name)) < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("rounds", "val_size", "seed"):
            if int(getattr(self, name)) < 0:
                raise InvalidArgumentError(f"{name} must be non-negative, got {getattr(self, name)}")
        if self.train_size + self.val_size > 60000:
            raise InvalidArgumentError("train_size + val_size must be at most 60000")
        if self.test_size is not None and not 0 <= self.test_size <= 10000:
            raise InvalidArgumentError("test_size must be between 0 and 10000")
        if not (self.lr > 0 and 0 <= self.momentum < 1 and 0 < self.lr_factor <= 1):
            raise InvalidArgumentError("need lr > 0, 0 <= momentum < 1, 0 < lr_factor <= 1")
        if not 0 < self.delta < 1:
            raise InvalidArgumentError(f"delta must be in (0, 1), got {self.delta}")
        if self.engine not in ENGINES:
            raise InvalidArgumentError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if not self.method.startswith("cepam") and (self.dim != 1 or self.lattice != "Z"):
            raise InvalidArgumentError("dim and lattice apply to the CEPAM methods only")

    @property
    def samples_per_round(self) -> int:
        """Samples each client draws with replacement in a round,
        ``sgd_steps * batch_size`` (the accountant's ``samples_per_round``)."""
        return self.sgd_steps * self.batch_size

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FLConfig":
        """The configuration ``d`` (:meth:`to_dict`) holds; a run saved
        before ``local_steps`` was renamed ``sgd_steps`` reads the same.

        Raises:
            InvalidArgumentError: unknown keys, or both names.
        """
        d = dict(d)
        if "local_steps" in d:  # config.json, rounds.json and state.pt of older runs
            if "sgd_steps" in d:
                raise InvalidArgumentError("a configuration holds both local_steps (the old "
                                           "name) and sgd_steps")
            d["sgd_steps"] = d.pop("local_steps")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise InvalidArgumentError(f"unknown configuration keys: {sorted(unknown)}")
        return cls(**d)

    def replace(self, **changes: Any) -> "FLConfig":
        return dataclasses.replace(self, **changes)

    @property
    def label(self) -> str:
        """The paper's method name, e.g. ``CEPAM-Gaussian (n=2)`` (``, Flower``
        appended for the Flower engine)."""
        label = method_label(self.method, self.dim, self.lattice)
        return label if self.engine == "builtin" else f"{label}, Flower"

    def group_key(self) -> str:
        """Identifies the configuration without its seed (runs of one group
        differ in seed only)."""
        d = self.to_dict()
        d.pop("seed")
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_run_name(cls, name: str, *, seed: int = 0, rounds: int = 80) -> "FLConfig":
        """The configuration :meth:`run_name` spells ``name``, every setting it
        does not spell out at its default.

        Raises:
            InvalidArgumentError: ``name`` is not a run name, or holds a hash
                of further settings (only the run's ``config.json`` has them).
        """
        model, _, rest = str(name).partition("-")
        method = max((m for m in METHODS if rest == m or rest.startswith(m + "-")), key=len,
                     default=None)
        if model not in MODEL_NAMES or method is None:
            raise InvalidArgumentError(f"{name!r} is not a run name (model-method[-settings])")
        tokens: list[str] = []
        for token in rest[len(method) + 1:].split("-") if rest != method else []:
            if tokens and re.fullmatch(r".*\de", tokens[-1]) and token[:1].isdigit():
                tokens[-1] += "-" + token  # the exponent of 1e-05
            else:
                tokens.append(token)
        changes: dict[str, Any] = {}
        patterns = (("dim", r"n(\d+)", int), ("lattice", f"({'|'.join([*LATTICE_DIMS, 'auto'])})", str),
                    ("sigma", r"sigma(.+)", float), ("b", r"b(.+)", float),
                    ("alpha", r"alpha(.+)", float))
        for token in tokens:
            for key, pattern, kind in patterns:
                found = re.fullmatch(pattern, token)
                if found and key not in changes:
                    try:
                        changes[key] = kind(found.group(1))
                    except ValueError:
                        continue
                    break
            else:
                raise InvalidArgumentError(
                    f"run name {name!r}: {token!r} is not a setting a run name spells out "
                    "(a hashed name keeps its settings in the run's config.json)")
        config = cls(model=model, method=method, seed=seed, rounds=rounds, **changes)
        if config.run_name() != name:
            raise InvalidArgumentError(f"{name!r} is not a run name (it reads back as "
                                       f"{config.run_name()!r})")
        return config

    def run_name(self) -> str:
        """A directory name for this configuration without its seed, such as
        ``cnn-cepam-gaussian-n2``.  Non-default noise scales and splits are
        spelled out; any other non-default setting (except ``rounds``) adds a
        short hash."""
        default = FLConfig()
        parts = [self.model, self.method]
        if self.method.startswith("cepam"):
            parts.append(f"n{self.dim}")
            if self.lattice != "Z":
                parts.append(self.lattice)
        if "gaussian" in self.method and self.sigma != default.sigma:
            parts.append(f"sigma{self.sigma:g}")
        if "laplace" in self.method and self.b != default.b:
            parts.append(f"b{self.b:g}")
        if self.alpha is not None:
            parts.append(f"alpha{self.alpha:g}")
        if self.engine != default.engine:
            parts.append(self.engine)
        # rounds is left out: a run may be resumed with more rounds in its directory.
        named = {"model", "method", "dim", "lattice", "sigma", "b", "alpha", "seed", "rounds",
                 "engine"}
        other = {_HASHED_AS.get(k, k): v for k, v in self.to_dict().items()
                 if k not in named and v != getattr(default, k)}
        if other:
            parts.append(hashlib.sha256(json.dumps(other, sort_keys=True).encode())
                         .hexdigest()[:8])
        return "-".join(parts)


# Settings hashed into run names under the name they had when the hash was
# introduced, so that a renamed setting keeps its runs' directories.
_HASHED_AS = {"sgd_steps": "local_steps"}


def json_value(v: Any) -> Any:
    """``v`` for JSON: NaN as null, infinities as the strings ``"inf"`` / ``"-inf"``."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v
