"""Federated learning on MNIST with CEPAM and its baselines (the paper's experiments).

The harness trains K clients per round together (stacked models), sends each
client's update through a real transport (:mod:`.methods`: LRSUQ payloads
encoded by the client and decoded by the server for CEPAM, float32 or SDQ
payloads for the baselines) and records accuracy, loss, bits and privacy per
round (:mod:`.experiment`).  Modules:

* :mod:`.data` -- MNIST IDX loader with checksums (``$CEPAM_DATA``);
* :mod:`.split` -- train/validation split, IID and Dirichlet client splits;
* :mod:`.models` -- the paper's MLP (25,818 parameters) and CNN (6,422);
* :mod:`.training` -- local momentum SGD of all clients at once, evaluation;
* :mod:`.methods` -- FL, FL+SDQ, FL+Gaussian(+SDQ), FL+Laplace(+SDQ),
  CEPAM-Gaussian, CEPAM-Laplace;
* :mod:`.privacy` -- the "eps so far" column from :mod:`cepam.accounting`;
* :mod:`.config` -- the configuration of a run and the names it accepts
  (no torch needed);
* :mod:`.experiment` -- one run, on the engine its configuration names;
* :mod:`.engines` -- the engines by name (one table);
* :mod:`.builtin_engine` -- rounds of all clients in one process;
* :mod:`.flower_engine` -- the same run on Flower's simulation engine
  (``engine="flower"``: cepam_mod and CepamStrategy; needs ``cepam[flower]``);
* :mod:`.run` -- what the engines share: data tensors, split, initial model,
  schedule, result;
* :mod:`.rundir` -- a run's directory: output files, checkpoint, resume;
* :mod:`.results`, :mod:`.plots` -- tables with 95% CIs, figures;
* :mod:`.cli` -- ``cepam fl run | table | plot``.

Training needs torch (install it first with ``pip install torch==2.13.0``; it
is not a dependency of cepam), imported only when a name that needs it is
used; reading and tabulating finished runs (:mod:`.config`, :mod:`.results`)
does not.
"""

from __future__ import annotations

from .._lazy import lazy_exports


_EXPORTS = {
    "load_mnist": "data",
    "DatasetError": "data",
    "MLP": "models",
    "CNN": "models",
    "build_model": "models",
    "METHODS": "config",
    "make_method": "methods",
    "FLConfig": "config",
    "TensorMNIST": "experiment",
    "run_experiment": "experiment",
    "run_flower_experiment": "flower_engine",
    "load_runs": "results",
    "summarize": "results",
    "format_table": "results",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
