"""One federated-learning run: rounds, evaluation, learning-rate schedule, resume.

A run is fixed by an :class:`FLConfig` (the defaults are the paper's setup,
docs/design.md, section 9), runs on the engine it names (:mod:`.engines`:
``builtin``, :mod:`.builtin_engine`; ``flower``, :mod:`.flower_engine`) and
writes into its own directory (:mod:`.rundir`: ``config.json``,
``rounds.csv``, ``rounds.json`` with one row per round (:data:`COLUMNS`),
and the checkpoint ``state.pt``).

A run whose directory already holds a ``state.pt`` continues after its last
completed round (the configuration must match, except ``rounds``, which may
be raised).  Every random draw is derived from (seed, purpose, round,
client) (:mod:`.seeds`), so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .config import ENGINES, FLConfig
from .engines import engine
from .run import PlateauSchedule, RunResult, TensorMNIST
from .rundir import COLUMNS, TIMING_COLUMNS, write_rows_csv

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
    return engine(config.engine).run(config, data, directory, progress=progress,
                                     stop_after=stop_after, eval_batch=eval_batch,
                                     data_dir=data_dir)
