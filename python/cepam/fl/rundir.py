"""The directory of one federated-learning run: its files, checkpoint and resume.

Every engine (:mod:`.engines`) writes the same files into a run's directory:

* ``config.json`` -- the configuration;
* ``rounds.csv`` and ``rounds.json`` -- one row per round (:data:`COLUMNS`),
  row 0 being the initial model;
* ``state.pt`` -- the global weights, the schedule and the rows after the
  last completed round.

Every file is written atomically (:func:`atomic_write`): an interrupted run
leaves the previous complete version.  A directory that already holds a
``state.pt`` of the same configuration (``rounds`` may differ) is resumed
from it (:func:`matching_state`).  torch is imported only to save or load
the checkpoint.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from .config import FLConfig, json_value

__all__ = [
    "COLUMNS",
    "TIMING_COLUMNS",
    "STATE_VERSION",
    "atomic_write",
    "write_rows_csv",
    "write_config",
    "write_outputs",
    "save_state",
    "load_state",
    "matching_state",
]

COLUMNS = (
    "round", "lr", "train_loss", "val_loss", "val_acc", "test_loss", "test_acc",
    "bits_per_client", "bits_per_coordinate", "bits_measured", "update_norm",
    "clipped_fraction", "epsilon", "seconds", "train_seconds", "transport_seconds",
    "eval_seconds", "cohort_size", "clip", "noised_clipped_fraction", "client_epsilon",
)
# Wall-clock columns: the only ones that differ between two runs of one seed.
TIMING_COLUMNS = ("seconds", "train_seconds", "transport_seconds", "eval_seconds")

STATE_VERSION = 1


def _csv_value(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder,
    flushed to disk and renamed over ``path``: readers see the old or the new
    file, never a part.  Raises OSError."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_rows_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV text: a header of :data:`COLUMNS`, then one line per row
    (NaN and None empty, booleans ``true``/``false``, floats by ``repr``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in COLUMNS])
    return buf.getvalue()


def write_config(directory: Path, config: FLConfig) -> None:
    """Write ``config.json`` (the configuration) into ``directory``."""
    atomic_write(directory / "config.json",
                 (json.dumps(config.to_dict(), indent=1) + "\n").encode())


def write_outputs(directory: Path, config: FLConfig, rows: list[dict[str, Any]], *,
                  complete: bool) -> None:
    """Write ``rounds.csv`` and ``rounds.json`` (the rows, the configuration,
    whether the run is ``complete``, notes on the columns) into ``directory``."""
    atomic_write(directory / "rounds.csv", write_rows_csv(rows).encode())
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
                       "an honest-but-curious client, Laplace methods pure DP; record-level "
                       "(one training example replaced) in the paper's setting, else "
                       "client-level under config.relation, as client_epsilon "
                       "(cepam.fl.privacy.epsilon_scope); 'inf' without noise, null where "
                       "not available",
            "client_epsilon": "client-level eps after this many rounds at delta = "
                              "config.delta for any local loop (cepam.fl.privacy."
                              "client_epsilon_function): the run's relation, sample rate and "
                              "count noise, honest-but-curious client",
            "noised_clipped_fraction": "1 - the server's noised unclipped fraction "
                                       "(cepam.clipping), the published metric; "
                                       "clipped_fraction is the exact one (not released)",
        },
        "rows": [{c: json_value(r.get(c)) for c in COLUMNS} for r in rows],
    }
    if any("cohort" in r for r in rows):
        doc["notes"]["cohorts"] = ("the clients (indices into the population) sampled in each "
                                   "round by the server's own seeded Generator; round 0 none")
        doc["cohorts"] = [list(r.get("cohort", [])) for r in rows]
    atomic_write(directory / "rounds.json", (json.dumps(doc, indent=1) + "\n").encode())


def save_state(directory: Path, config: FLConfig, round_: int, params: dict[str, Any], *,
               schedule: dict[str, float], rows: list[dict[str, Any]],
               clip: dict[str, float] | None = None) -> None:
    """Write the checkpoint ``state.pt`` after round ``round_``: the global
    weights ``params`` (torch tensors, copied), the learning-rate
    ``schedule``'s state, the rows so far and, with adaptive clipping, the
    clip's state (:meth:`cepam.clipping.AdaptiveClip.state_dict`)."""
    import torch

    buf = io.BytesIO()
    state = {"version": STATE_VERSION, "config": config.to_dict(), "round": round_,
             "params": {k: v.clone() for k, v in params.items()},
             "schedule": dict(schedule), "rows": rows}
    if clip is not None:
        state["clip"] = dict(clip)
    torch.save(state, buf)
    atomic_write(directory / "state.pt", buf.getvalue())


def load_state(directory: Path) -> dict[str, Any] | None:
    """The checkpoint in ``directory`` (keys ``version``, ``config``,
    ``round``, ``params``, ``schedule``, ``rows``), or None if there is none.

    Raises:
        InvalidArgumentError: a checkpoint of another version.
    """
    import torch

    path = directory / "state.pt"
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("version") != STATE_VERSION:
        raise InvalidArgumentError(f"{path}: unknown checkpoint version {state.get('version')}")
    return state


def matching_state(out: Path | None, config: FLConfig) -> dict[str, Any] | None:
    """The saved state of the run in ``out`` (created if missing), or None.

    Raises:
        InvalidArgumentError: ``out`` holds a run of another configuration.
    """
    if out is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    state = load_state(out)
    if state is not None:
        saved = FLConfig.from_dict(state["config"])
        if saved.replace(rounds=config.rounds) != config:
            raise InvalidArgumentError(
                f"{out} holds a run with another configuration ({saved.run_name()}, seed "
                f"{saved.seed}); use another --out directory"
            )
    return state
