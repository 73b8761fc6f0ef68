"""The paper's experiment on Flower's simulation engine (``engine="flower"``).

The same run as :mod:`.builtin_engine` (same split, initial model, sampling of
local steps, local SGD, learning-rate schedule, evaluation, output files),
with the clients as Flower SuperNodes on the Ray backend: client ``k`` is
the node with ``partition-id`` ``k`` and trains alone in a ClientApp call;
the server is a ServerApp.

* ``cepam-gaussian`` and ``cepam-laplace`` go through
  :func:`cepam.flower.cepam_mod` and :class:`cepam.flower.CepamStrategy`
  around FedAvg: X25519 key agreement, bare payloads (no names or shapes),
  eps from the strategy's accountant (the same setting and bound as the
  built-in engine's column).
* ``fl`` is Flower's FedAvg with float32 updates (charged 32 bits per
  coordinate, as on the built-in engine).

Other methods are refused: their transports exist on the built-in engine
only.  The columns are the built-in engine's, except that ``train_seconds``
and ``transport_seconds`` are NaN (a round on Flower is not split that way;
``seconds`` is its whole wall time, ``eval_seconds`` the server's
evaluation).  A run is not resumed: an unfinished directory starts again
from round 0; a finished one is returned as it is.

Every worker process loads MNIST itself, from ``data_dir`` (or
``$CEPAM_DATA``), and trains with one torch thread.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import InvalidArgumentError
from .data import load_mnist
from .config import FLConfig
from .methods import make_method
from .models import build_model
from .run import PlateauSchedule, RunResult, TensorMNIST, initial_params, prepare
from .rundir import matching_state, save_state, write_config, write_outputs
from .training import LocalTrainer, evaluate

__all__ = ["FLOWER_METHODS", "run_flower_experiment", "flower_apps", "check_flower_config"]

FLOWER_METHODS = ("fl", "cepam-gaussian", "cepam-laplace")
_WORKERS: dict[tuple, dict[str, Any]] = {}  # per process: data and split of a run


def check_flower_config(config: FLConfig) -> None:
    """Raises InvalidArgumentError for a run the Flower engine cannot do."""
    if config.method not in FLOWER_METHODS:
        raise InvalidArgumentError(
            f"the Flower engine runs {', '.join(FLOWER_METHODS)}; {config.method} is on the "
            "built-in engine only")
    if config.clip_all and config.method == "fl":
        raise InvalidArgumentError("clip_all is not supported on the Flower engine")
    default = FLConfig()
    changed = [name for name in ("population", "sample_rate", "sampling", "relation",
                                 "clip_quantile", "server_lr", "central_dp")
               if getattr(config, name) != getattr(default, name)]
    if changed:
        raise InvalidArgumentError(
            f"{', '.join(changed)}: client sampling, relations, adaptive clipping, the server "
            "learning rate and central DP run on the built-in engine only (engine 'builtin'; "
            "with Flower: CepamStrategy)")


def _worker(config: FLConfig, data_dir: str | None) -> dict[str, Any]:
    """This process's copy of the run's data, split and trainer (built once)."""
    key = (config.group_key(), config.seed, data_dir)
    if key not in _WORKERS:
        torch.set_num_threads(1)
        data = TensorMNIST(load_mnist(data_dir))
        model = build_model(config.model, 0)
        _WORKERS[key] = {"data": data, "prepared": prepare(data, config), "model": model,
                         "trainer": LocalTrainer(model, momentum=config.momentum)}
    return _WORKERS[key]


def flower_apps(config: FLConfig, *, data_dir: str | None, initial: dict[str, torch.Tensor],
                on_round: Callable[[int, dict[str, torch.Tensor], Any], float],
                num_rounds: int, dataset_size: int) -> tuple[Any, Any, dict[str, Any]]:
    """The ClientApp and ServerApp of one run, and a dict the ServerApp fills
    (``result``, ``strategy``).

    ``on_round(round, params, train_metrics)`` is called on the server after
    every round (round 0: the initial model, no metrics) and returns the
    learning rate of the next round.  ``dataset_size``: |D| of the
    accountant (the smallest client's).
    """
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord
    from flwr.app import RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    from ..accounting import FLSetting
    from ..flower import CepamStrategy, cepam_mod

    method = make_method(config.method, sigma=config.sigma, b=config.b, dim=config.dim,
                         lattice=config.lattice, clip=config.clip, clip_all=config.clip_all,
                         sdq_step=config.sdq_step)
    clip = method.clip

    client = ClientApp(mods=[cepam_mod] if config.method.startswith("cepam") else [])

    @client.train()
    def train(msg: Message, ctx: Context) -> Message:
        w = _worker(config, data_dir)
        k = int(ctx.node_config["partition-id"])
        t = int(msg.content["config"]["server-round"])
        lr = float(msg.content["config"]["lr"])
        params = {n: torch.from_numpy(a.numpy().copy()) for n, a in msg.content["arrays"].items()}
        idx = w["prepared"]["clients"].sample(config.seed, t, config.sgd_steps,
                                              config.batch_size)[k:k + 1]
        local, losses = w["trainer"].train(params, w["data"].train_x[idx],
                                           w["data"].train_y[idx], lr)
        new = {n: local[n][0] for n in params}
        norm = math.sqrt(sum(float((new[n].double() - params[n].double()).pow(2).sum())
                             for n in params))
        return Message(RecordDict({
            "arrays": ArrayRecord({n: Array(v.numpy()) for n, v in new.items()}),
            "metrics": MetricRecord({"num-examples": 1, "train-loss": float(losses[0]),
                                     "update-norm": norm,
                                     "clipped": float(clip is not None and norm > clip)}),
        }), reply_to=msg)

    out: dict[str, Any] = {}

    def recording(cls: type) -> type:
        class Recording(cls):  # type: ignore[misc, valid-type]
            last_train: Any = None

            def aggregate_train(self, server_round, replies):
                arrays, metrics = super().aggregate_train(server_round, replies)
                self.last_train = None if metrics is None else dict(metrics)
                sizes = getattr(self, "last_payload_bytes", None)
                if self.last_train is not None and sizes:  # the server's own record
                    self.last_train["cepam-payload-bytes"] = sum(sizes) / len(sizes)
                return arrays, metrics

        return Recording

    server = ServerApp()

    @server.main()
    def main(grid: Grid, ctx: Context) -> None:
        inner = FedAvg(fraction_evaluate=0.0, min_train_nodes=config.clients,
                       min_available_nodes=config.clients)
        if config.method.startswith("cepam"):
            setting = FLSetting(clip=config.clip, clients=config.clients,
                                samples_per_round=config.samples_per_round,
                                dataset_size=dataset_size)
            strategy = recording(CepamStrategy)(
                inner, mechanism=method.mechanism, clip=config.clip, setting=setting,
                delta=config.delta, lattice=config.lattice, dim=method.dim, pad=None,
                authenticated_transport=True)  # the built-in engine's bits; in-process
        else:
            strategy = recording(FedAvg)(fraction_evaluate=0.0, min_train_nodes=config.clients,
                                         min_available_nodes=config.clients)
        train_config = ConfigRecord({"lr": float(config.lr)})

        def evaluate_fn(rnd: int, arrays: ArrayRecord) -> None:
            params = {n: torch.from_numpy(a.numpy().copy()) for n, a in arrays.items()}
            train_config["lr"] = float(on_round(rnd, params, strategy.last_train if rnd else None))
            return None

        out["strategy"] = strategy
        out["result"] = strategy.start(
            grid=grid, initial_arrays=ArrayRecord({n: Array(v.numpy()) for n, v in
                                                   initial.items()}),
            num_rounds=num_rounds, train_config=train_config, evaluate_fn=evaluate_fn)

    return client, server, out


def run_flower_experiment(
    config: FLConfig,
    data: TensorMNIST,
    directory: str | os.PathLike[str] | None = None,
    *,
    data_dir: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
    eval_batch: int = 500,
    num_cpus: int = 2,
) -> RunResult:
    """Runs one run of ``config`` on Flower's simulation engine (see the module).

    Args:
        config: the run (``engine="flower"``; a method of :data:`FLOWER_METHODS`).
        data: MNIST tensors for the server's evaluation.
        directory: results as the built-in engine writes them (None: none).
        data_dir: MNIST folder the worker processes load (default $CEPAM_DATA).
        progress, stop_after, eval_batch: as :func:`.experiment.run_experiment`.
        num_cpus: CPUs given to Ray (one per concurrent client).

    Raises:
        InvalidArgumentError: a method the Flower engine does not run, or a
            directory holding another configuration.
        ImportError: Flower is not installed (``pip install "cepam[flower]"``).
    """
    from flwr.simulation import run_simulation

    check_flower_config(config)
    out = None if directory is None else Path(directory)
    state = matching_state(out, config)
    if state is not None and int(state["round"]) >= config.rounds:
        return RunResult(config=config, rows=list(state["rows"]), params=dict(state["params"]),
                         directory=out, complete=True, resumed_from=int(state["round"]))
    if out is not None:
        write_config(out, config)

    prepared = prepare(data, config)
    model = build_model(config.model, 0)
    m = sum(int(p.numel()) for p in model.parameters())
    schedule = PlateauSchedule(config.lr, config.lr_patience, config.lr_factor)
    rows: list[dict[str, Any]] = []
    params_box: dict[str, dict[str, torch.Tensor]] = {"params": initial_params(config)}
    clock = {"last": time.perf_counter()}
    last = config.rounds if stop_after is None else min(config.rounds, stop_after)

    def on_round(rnd: int, params: dict[str, torch.Tensor], metrics: Any) -> float:
        t_eval = time.perf_counter()
        lr = schedule.lr
        val_loss, val_acc = evaluate(model, params, prepared["val_x"], prepared["val_y"],
                                     batch_size=eval_batch)
        test_loss, test_acc = evaluate(model, params, prepared["test_x"], prepared["test_y"],
                                       batch_size=eval_batch)
        t_end = time.perf_counter()
        compressed = config.method.startswith("cepam")
        if rnd == 0:
            row = {"round": 0, "lr": lr, "train_loss": math.nan, "val_loss": val_loss,
                   "val_acc": val_acc, "test_loss": test_loss, "test_acc": test_acc,
                   "bits_per_client": 0.0, "bits_per_coordinate": 0.0,
                   "bits_measured": compressed, "update_norm": math.nan,
                   "clipped_fraction": math.nan, "epsilon": 0.0, "seconds": 0.0,
                   "train_seconds": 0.0, "transport_seconds": 0.0,
                   "eval_seconds": t_end - t_eval}
        else:
            schedule.step(val_acc)
            metrics = {} if metrics is None else dict(metrics)
            bits = 8.0 * metrics.get("cepam-payload-bytes", math.nan) if compressed else 32.0 * m
            row = {"round": rnd, "lr": lr, "train_loss": metrics.get("train-loss", math.nan),
                   "val_loss": val_loss, "val_acc": val_acc, "test_loss": test_loss,
                   "test_acc": test_acc, "bits_per_client": bits,
                   "bits_per_coordinate": bits / m, "bits_measured": compressed,
                   "update_norm": metrics.get("update-norm", math.nan),
                   "clipped_fraction": metrics.get("clipped", math.nan),
                   "epsilon": metrics.get("cepam-epsilon", math.nan) if compressed
                   else math.inf,
                   "seconds": t_end - clock["last"], "train_seconds": math.nan,
                   "transport_seconds": math.nan, "eval_seconds": t_end - t_eval}
        rows.append(row)
        params_box["params"] = params
        if out is not None:
            save_state(out, config, rnd, params, schedule=schedule.state_dict(), rows=rows)
            write_outputs(out, config, rows, complete=(rnd == config.rounds))
        if progress is not None and rnd > 0:
            progress(row)
        clock["last"] = time.perf_counter()
        return schedule.lr

    client, server, box = flower_apps(config, data_dir=data_dir, initial=params_box["params"],
                                      on_round=on_round, num_rounds=last,
                                      dataset_size=min(prepared["clients"].sizes))
    run_simulation(server_app=server, client_app=client, num_supernodes=config.clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": int(num_cpus),
                                                 "logging_level": logging.ERROR,
                                                 "log_to_driver": False}})
    if "result" not in box:
        raise RuntimeError("the Flower ServerApp did not finish (see Flower's log above)")
    complete = len(rows) - 1 >= config.rounds
    if out is not None:
        write_outputs(out, config, rows, complete=complete)
    return RunResult(config=config, rows=rows, params=params_box["params"], directory=out,
                     complete=complete, resumed_from=0)
