"""The built-in engine (``engine="builtin"``): all clients of a round trained
together in one process.

Each round: every client starts from the global weights and trains
``sgd_steps`` momentum-SGD steps (all clients together, :mod:`.training`);
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

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from .config import FLConfig
from .methods import make_method
from .models import build_model
from .privacy import config_epsilon_function
from .run import PlateauSchedule, RunResult, TensorMNIST, initial_params, prepare
from .rundir import matching_state, save_state, write_config, write_outputs
from .seeds import client_secret, torch_generator
from .training import ClientData, LocalTrainer, evaluate

__all__ = ["run_builtin_experiment"]


def run_builtin_experiment(
    config: FLConfig,
    data: TensorMNIST,
    directory: str | os.PathLike[str] | None = None,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
    eval_batch: int = 500,
    data_dir: str | None = None,
) -> RunResult:
    """Runs (or resumes) one run of ``config`` on the built-in engine; the
    arguments and errors are :func:`.experiment.run_experiment`'s
    (``data_dir`` is not used: this engine trains on ``data``)."""
    method = make_method(config.method, sigma=config.sigma, b=config.b, dim=config.dim,
                         lattice=config.lattice, clip=config.clip, clip_all=config.clip_all,
                         sdq_step=config.sdq_step)
    prepared = prepare(data, config)
    clients: ClientData = prepared["clients"]
    model = build_model(config.model, 0)
    trainer = LocalTrainer(model, momentum=config.momentum)
    secrets = [client_secret(config.seed, k) for k in range(config.clients)]
    eps_of = config_epsilon_function(config, delta=config.delta, dataset_size=min(clients.sizes),
                                     coordinates=sum(p.numel() for p in model.parameters()))
    schedule = PlateauSchedule(config.lr, config.lr_patience, config.lr_factor)

    out = None if directory is None else Path(directory)
    state = matching_state(out, config)
    if state is not None:
        start = int(state["round"])
        params = {k: v.clone() for k, v in state["params"].items()}
        schedule.load_state_dict(state["schedule"])
        rows = list(state["rows"])
    else:
        start = 0
        params = initial_params(config)
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
            save_state(out, config, 0, params, schedule=schedule.state_dict(), rows=rows)
    if out is not None:
        write_config(out, config)

    m = sum(int(p.numel()) for p in params.values())
    names = list(params)
    last = config.rounds if stop_after is None else min(config.rounds, stop_after)
    workers = min(torch.get_num_threads(), config.clients)
    pool = ThreadPoolExecutor(workers) if workers > 1 and method.compressed else None
    try:
        for t in range(start + 1, last + 1):
            t_start = time.perf_counter()
            lr = schedule.lr
            idx = clients.sample(config.seed, t, config.sgd_steps, config.batch_size)
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
                save_state(out, config, t, params, schedule=schedule.state_dict(), rows=rows)
                write_outputs(out, config, rows, complete=(t == config.rounds))
            if progress is not None:
                progress(row)
    finally:
        if pool is not None:
            pool.shutdown()
    complete = len(rows) - 1 >= config.rounds
    if out is not None:
        write_outputs(out, config, rows, complete=complete)
    return RunResult(config=config, rows=rows, params=params, directory=out,
                     complete=complete, resumed_from=start)
