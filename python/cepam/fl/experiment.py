"""One federated-learning run: rounds, evaluation, learning-rate schedule, resume.

A run is fixed by an :class:`FLConfig` (the defaults are the paper's setup,
docs/design.md, section 9) and writes into its own directory:

* ``config.json`` -- the configuration;
* ``rounds.csv`` and ``rounds.json`` -- one row per round (:data:`COLUMNS`),
  row 0 being the initial model;
* ``state.pt`` -- the global weights, the schedule and the rows after the
  last completed round (written atomically).

A run whose directory already holds a ``state.pt`` continues after its last
completed round (the configuration must match, except ``rounds``, which may
be raised).  Every random draw is derived from (seed, purpose, round,
client) (:mod:`.seeds`), so a resumed run equals an uninterrupted one.

Each round: every client starts from the global weights and trains
``local_steps`` momentum-SGD steps (all clients together, :mod:`.training`);
its update (local minus global weights) goes through the method's transport
(:mod:`.methods`): real payload bytes with encode at the client and decode
at the server for the compressing methods.  The server adds the average of
the received updates to the global weights, then evaluates the global model
on the validation and test sets.  The learning rate is halved when the
validation accuracy has not improved on its best for ``lr_patience``
consecutive rounds (the counter restarts after each halving).

Columns: ``train_loss`` is the clients' mean local loss; ``update_norm`` the
mean l2 norm of the clients' updates before clipping and
``clipped_fraction`` the share of clients whose update was clipped;
``epsilon`` the privacy spent so far (:mod:`.privacy`); ``seconds`` the wall
time of the round's training, transport and evaluation (split in the
``*_seconds`` columns; the checkpoint and the accountant are not counted).

Bits: ``bits_per_client`` is the mean over clients of ``8 * len(payload)``
(header and tag included); methods without a payload (``fl``,
``fl-gaussian``, ``fl-laplace``) are charged 32 bits per float32 coordinate
and have ``bits_measured`` false.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..errors import InvalidArgumentError
from .data import MNIST, normalize
from .config import ENGINES, FLConfig, json_value
from .methods import make_method
from .models import build_model
from .privacy import config_epsilon_function
from .seeds import client_secret, derive_seed, numpy_rng, torch_generator
from .split import split_clients, train_validation_split
from .training import ClientData, LocalTrainer, evaluate

__all__ = [
    "FLConfig",
    "ENGINES",
    "TensorMNIST",
    "RunResult",
    "PlateauSchedule",
    "COLUMNS",
    "TIMING_COLUMNS",
    "run_experiment",
    "write_rows_csv",
]

COLUMNS = (
    "round", "lr", "train_loss", "val_loss", "val_acc", "test_loss", "test_acc",
    "bits_per_client", "bits_per_coordinate", "bits_measured", "update_norm",
    "clipped_fraction", "epsilon", "seconds", "train_seconds", "transport_seconds",
    "eval_seconds",
)
# Wall-clock columns: the only ones that differ between two runs of one seed.
TIMING_COLUMNS = ("seconds", "train_seconds", "transport_seconds", "eval_seconds")

_STATE_VERSION = 1


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


# --------------------------------------------------------------------------- files


def _csv_value(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_rows_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in COLUMNS])
    return buf.getvalue()


def _write_outputs(directory: Path, config: FLConfig, rows: list[dict[str, Any]],
                   complete: bool) -> None:
    _atomic_write(directory / "rounds.csv", write_rows_csv(rows).encode())
    doc = {
        "config": config.to_dict(),
        "label": config.label,
        "run_name": config.run_name(),
        "complete": complete,
        "columns": list(COLUMNS),
        "notes": {
            "bits_per_client": "mean over clients of 8 * len(payload), header and tag "
                               "included; methods without a payload (bits_measured false) "
                               "are charged 32 bits per float32 coordinate",
            "epsilon": "eps after this many rounds from cepam.accounting (see "
                       "cepam.fl.privacy): Gaussian methods at delta = config.delta against "
                       "an honest-but-curious client, Laplace methods pure DP; 'inf' "
                       "without noise, null where not available",
        },
        "rows": [{c: json_value(r.get(c)) for c in COLUMNS} for r in rows],
    }
    _atomic_write(directory / "rounds.json", (json.dumps(doc, indent=1) + "\n").encode())


def _save_state(directory: Path, config: FLConfig, round_: int, params: dict[str, torch.Tensor],
                schedule: PlateauSchedule, rows: list[dict[str, Any]]) -> None:
    buf = io.BytesIO()
    torch.save({"version": _STATE_VERSION, "config": config.to_dict(), "round": round_,
                "params": {k: v.clone() for k, v in params.items()},
                "schedule": schedule.state_dict(), "rows": rows}, buf)
    _atomic_write(directory / "state.pt", buf.getvalue())


def _matching_state(out: Path | None, config: FLConfig) -> dict[str, Any] | None:
    """The saved state of the run in ``out`` (created if missing), or None.

    Raises:
        InvalidArgumentError: ``out`` holds a run of another configuration.
    """
    if out is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    state = _load_state(out)
    if state is not None:
        saved = FLConfig.from_dict(state["config"])
        if saved.replace(rounds=config.rounds) != config:
            raise InvalidArgumentError(
                f"{out} holds a run with another configuration ({saved.run_name()}, seed "
                f"{saved.seed}); use another --out directory"
            )
    return state


def _load_state(directory: Path) -> dict[str, Any] | None:
    path = directory / "state.pt"
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("version") != _STATE_VERSION:
        raise InvalidArgumentError(f"{path}: unknown checkpoint version {state.get('version')}")
    return state


# --------------------------------------------------------------------------- the run


def _prepare(data: TensorMNIST, config: FLConfig) -> dict[str, Any]:
    n = len(data.train_y)
    train_idx, val_idx = train_validation_split(n, config.train_size, config.val_size,
                                                numpy_rng(config.seed, "split"))
    parts = split_clients(data.train_y.numpy()[train_idx], config.clients,
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


def _initial_params(config: FLConfig) -> dict[str, torch.Tensor]:
    model = build_model(config.model, derive_seed(config.seed, "init"))
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def run_experiment(
    config: FLConfig,
    data: TensorMNIST,
    directory: str | os.PathLike[str] | None = None,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
    eval_batch: int = 500,
    data_dir: str | None = None,
) -> RunResult:
    """Runs (or resumes) one federated-learning run.

    Args:
        config: the run's settings.
        data: MNIST tensors (:class:`TensorMNIST`).
        directory: where to write results and the checkpoint; an existing
            checkpoint is resumed.  None: nothing is written.
        progress: called with each new row.
        stop_after: stop once this round is complete (as if interrupted).
        eval_batch: batch size of evaluation.
        data_dir: the MNIST folder ``data`` came from, which the Flower
            engine's worker processes load again (default ``$CEPAM_DATA``).

    Returns:
        :class:`RunResult`.

    Raises:
        InvalidArgumentError: bad settings, or ``directory`` holds a run with
            another configuration.
    """
    if config.engine == "flower":
        from .flower_engine import run_flower_experiment

        return run_flower_experiment(config, data, directory, progress=progress,
                                     stop_after=stop_after, eval_batch=eval_batch,
                                     data_dir=data_dir)
    method = make_method(config.method, sigma=config.sigma, b=config.b, dim=config.dim,
                         lattice=config.lattice, clip=config.clip, clip_all=config.clip_all,
                         sdq_step=config.sdq_step)
    prepared = _prepare(data, config)
    clients: ClientData = prepared["clients"]
    model = build_model(config.model, 0)
    trainer = LocalTrainer(model, momentum=config.momentum)
    secrets = [client_secret(config.seed, k) for k in range(config.clients)]
    eps_of = config_epsilon_function(config, delta=config.delta, dataset_size=min(clients.sizes),
                                     coordinates=sum(p.numel() for p in model.parameters()))
    schedule = PlateauSchedule(config.lr, config.lr_patience, config.lr_factor)

    out = None if directory is None else Path(directory)
    state = _matching_state(out, config)
    if state is not None:
        start = int(state["round"])
        params = {k: v.clone() for k, v in state["params"].items()}
        schedule.load_state_dict(state["schedule"])
        rows = list(state["rows"])
    else:
        start = 0
        params = _initial_params(config)
        t0 = time.perf_counter()
        val_loss, val_acc = evaluate(model, params, prepared["val_x"], prepared["val_y"],
                                     batch_size=eval_batch)
        test_loss, test_acc = evaluate(model, params, prepared["test_x"], prepared["test_y"],
                                       batch_size=eval_batch)
        rows = [{
            "round": 0, "lr": config.lr, "train_loss": math.nan, "val_loss": val_loss,
            "val_acc": val_acc, "test_loss": test_loss, "test_acc": test_acc,
            "bits_per_client": 0.0, "bits_per_coordinate": 0.0,
            "bits_measured": method.compressed, "update_norm": math.nan,
            "clipped_fraction": math.nan, "epsilon": 0.0, "seconds": 0.0,
            "train_seconds": 0.0, "transport_seconds": 0.0,
            "eval_seconds": time.perf_counter() - t0,
        }]
        if out is not None:
            _save_state(out, config, 0, params, schedule, rows)
    if out is not None:
        _atomic_write(out / "config.json",
                      (json.dumps(config.to_dict(), indent=1) + "\n").encode())

    m = sum(int(p.numel()) for p in params.values())
    names = list(params)
    last = config.rounds if stop_after is None else min(config.rounds, stop_after)
    workers = min(torch.get_num_threads(), config.clients)
    pool = ThreadPoolExecutor(workers) if workers > 1 and method.compressed else None
    try:
        for t in range(start + 1, last + 1):
            t_start = time.perf_counter()
            lr = schedule.lr
            idx = clients.sample(config.seed, t, config.local_steps, config.batch_size)
            local, losses = trainer.train(params, data.train_x[idx], data.train_y[idx], lr)
            t_train = time.perf_counter()

            updates = {n: local[n] - params[n].unsqueeze(0) for n in names}
            sq = sum(u.double().pow(2).flatten(1).sum(1) for u in updates.values())
            norms = torch.sqrt(sq)

            def transport(k: int, t: int = t, updates: dict = updates):
                upd = {n: updates[n][k] for n in names}
                noise = (torch_generator(config.seed, "noise", t, k)
                         if method.uses_noise_generator else None)
                msg = method.send(upd, round=t, client=k, secret=secrets[k], noise=noise)
                return method.receive(msg, client=k, secret=secrets[k]), msg.bits

            # Clients are independent; the codec releases the GIL, so with several
            # torch threads they are encoded and decoded in parallel.  The sum is
            # taken in client order whatever the thread count.
            if pool is not None:
                delivered = list(pool.map(transport, range(config.clients)))
            else:
                delivered = [transport(k) for k in range(config.clients)]
            total = {n: torch.zeros_like(p) for n, p in params.items()}
            for received, _ in delivered:
                for n in names:
                    total[n] += received[n]
            bits = [b for _, b in delivered]
            for n in names:
                params[n] = params[n] + total[n] / config.clients
            t_transport = time.perf_counter()

            val_loss, val_acc = evaluate(model, params, prepared["val_x"], prepared["val_y"],
                                         batch_size=eval_batch)
            test_loss, test_acc = evaluate(model, params, prepared["test_x"], prepared["test_y"],
                                           batch_size=eval_batch)
            schedule.step(val_acc)
            t_end = time.perf_counter()
            mean_bits = float(np.mean(bits))
            clip_applies = method.clip is not None
            row = {
                "round": t, "lr": lr, "train_loss": float(losses.mean()),
                "val_loss": val_loss, "val_acc": val_acc,
                "test_loss": test_loss, "test_acc": test_acc,
                "bits_per_client": mean_bits, "bits_per_coordinate": mean_bits / m,
                "bits_measured": method.compressed,
                "update_norm": float(norms.mean()),
                "clipped_fraction": (float((norms > method.clip).double().mean())
                                     if clip_applies else 0.0),
                "epsilon": eps_of(t),
                "seconds": t_end - t_start, "train_seconds": t_train - t_start,
                "transport_seconds": t_transport - t_train, "eval_seconds": t_end - t_transport,
            }
            rows.append(row)
            if out is not None:
                _save_state(out, config, t, params, schedule, rows)
                _write_outputs(out, config, rows, complete=(t == config.rounds))
            if progress is not None:
                progress(row)
    finally:
        if pool is not None:
            pool.shutdown()
    complete = len(rows) - 1 >= config.rounds
    if out is not None:
        _write_outputs(out, config, rows, complete=complete)
    return RunResult(config=config, rows=rows, params=params, directory=out,
                     complete=complete, resumed_from=start)
