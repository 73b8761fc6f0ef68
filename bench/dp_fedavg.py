"""DP-FedAvg at the scale people deploy: MNIST over 1,000 clients, Poisson
client sampling (q = 0.1, about 100 a round), client-level eps 1, 4 and 8
(add-remove-one-client, delta = 1e-5), 3 seeds.

    python bench/dp_fedavg.py --data-dir ../shared/data/mnist
    python bench/dp_fedavg.py --render        # the table from the JSON into the doc only
    python bench/dp_fedavg.py --tiny --out /tmp/x.json --doc /tmp/x.md   # smoke run

Rows (every one through the built-in harness, :mod:`cepam.fl`, with the same
model, split, cohorts, local training, clip and server learning rate):

* **no DP**: float32 updates, unclipped, the plain mean of the cohort;
* **central DP-FedAvg** (McMahan et al. 2018, the standard anchor): float32
  updates clipped to ``clip``; the server adds N(0, (z clip)^2) once to the
  sum and divides by the fixed n = q N; z is calibrated with dp-accounting's
  PLD accountant for the Poisson-subsampled Gaussian, add-remove
  (:func:`cepam.fl.privacy.calibrate_central_noise_multiplier`);
* **Flower's fixed clipping**: exactly what flwr's
  ``DifferentialPrivacyServerSideFixedClipping`` does with the same float-only
  update and the same z: it clips each update, FedAvg averages the replies
  (it divides by the *actual* cohort size k) and adds noise of std
  ``z clip / num_sampled_clients`` (= n here) to the mean.  Dividing by k is
  not the estimator the add-remove analysis of DP-FedAvg covers, so no eps is
  claimed for it beyond "the same z";
* **cepam (lattice auto, and Z)**: each sampled client clips and encodes its
  update with CEPAM-Gaussian (noise sigma per coordinate, the client's own);
  the server tops the sum up to T clients' worth of noise and divides by n
  (``relation="add-remove"``); sigma from
  :func:`cepam.accounting.calibrate_client_sigma` (``sample_rate=q``,
  ``relation="add-remove"``, ``threat_model="client"``: an honest-but-curious
  client, which knows its own noise; at the "aggregate" level of the central
  rows this is the stricter view).  Like the central rows they release the
  model only: no noised clipped fraction (``clipped_fraction_release`` off;
  publishing it with Andrew et al.'s count noise n / 20 costs, at eps 1, as
  much as raising eps 1.00 to 1.21 at the same sigma).

Accuracy: the MNIST test set (10,000 images) after the last round, mean and
sample standard deviation over the seeds.  Bits per coordinate: 32 for
float32; for cepam the measured payload bits (header and tag included),
averaged over rounds and clients.  Writes bench/results/dp_fedavg.json and
renders the tables into docs/EXPERIMENTS.md between the ``dp-fedavg-table``
marker comments (tests/docs/test_dp_fedavg_table.py checks that they match).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "dp_fedavg.json"
DOC = ROOT / "docs" / "EXPERIMENTS.md"
START, END = "<!-- dp-fedavg-table:start -->", "<!-- dp-fedavg-table:end -->"

#: The harness settings shared by every row (FLConfig keywords).
SETTINGS: dict[str, Any] = dict(
    model="mlp", population=1000, sample_rate=0.1, clients=100, alpha=1.0,
    train_size=59000, val_size=1000, test_size=None, rounds=50, sgd_steps=6,
    batch_size=10, lr=0.1, momentum=0.0, lr_patience=1000, clip=0.5, server_lr=1.0,
    delta=1e-5)
EPSILONS = (1.0, 4.0, 8.0)
SEEDS = (0, 1, 2)
#: A configuration that runs in seconds (the smoke test), on synthetic data
#: (a cohort of 50 expected, so that an empty one, whose chance the
#: accountant adds to delta, is negligible).
TINY: dict[str, Any] = dict(SETTINGS, population=200, sample_rate=0.25, clients=50,
                            train_size=6000, val_size=50, test_size=100, rounds=2,
                            sgd_steps=2, batch_size=5)
TINY_EPSILONS, TINY_SEEDS = (8.0,), (0,)

#: Row name -> FLConfig keywords (``None`` eps: the no-DP row).
ROWS = {
    "no DP": dict(method="fl"),
    "central DP-FedAvg": dict(method="fl", central_dp="dp-fedavg", relation="add-remove"),
    "Flower fixed clipping": dict(method="fl", central_dp="flower"),
    "cepam (auto)": dict(method="cepam-gaussian", lattice="auto", relation="add-remove",
                         clipped_fraction_release=False),
    "cepam (Z)": dict(method="cepam-gaussian", lattice="Z", relation="add-remove",
                      clipped_fraction_release=False),
}


def calibrate(settings: dict[str, Any], epsilon: float, *,
              tolerance: float = 1e-4) -> dict[str, float]:
    """z of the central rows (to ``tolerance``, relative; a coarser
    tolerance than 1e-4 also coarsens the PLD, for the smoke run) and sigma
    of the cepam rows at ``epsilon``."""
    from cepam import accounting
    from cepam.fl.config import FLConfig
    from cepam.fl.privacy import calibrate_central_noise_multiplier, cohort_cap, count_sigma

    probe = FLConfig(**settings, **ROWS["cepam (Z)"])
    q, n, rounds = probe.rate, probe.clients, probe.rounds
    z = calibrate_central_noise_multiplier(target_epsilon=epsilon,
                                           target_delta=settings["delta"], sample_rate=q,
                                           rounds=rounds, tolerance=tolerance,
                                           discretization=1e-4 if tolerance <= 1e-4 else 1e-2)
    cs = count_sigma(probe)  # None: the rows publish no count
    sigma = accounting.calibrate_client_sigma(
        target_epsilon=epsilon, target_delta=settings["delta"], rounds=rounds, clients=n,
        clip=settings["clip"], threat_model="client", sample_rate=q, relation="add-remove",
        sampling="poisson", count_sigma=cs)
    return {"epsilon": epsilon, "z": z, "sigma": float(sigma), "count_sigma": cs,
            "cap": cohort_cap(probe)}


def synthetic_mnist(seed: int = 0):
    """Random MNIST-shaped images whose label is readable from them (a
    bright 3x3 patch per class), for the smoke run."""
    from cepam.fl.data import MNIST

    rng = np.random.default_rng(seed)

    def images(labels: np.ndarray) -> np.ndarray:
        x = rng.integers(0, 64, size=(labels.size, 28, 28), dtype=np.uint8)
        for c in range(10):
            x[labels == c, 2 * c:2 * c + 3, 4:7] = 255
        return x

    train_y = rng.integers(0, 10, 60000).astype(np.int64)
    test_y = rng.integers(0, 10, 10000).astype(np.int64)
    return MNIST(images(train_y), train_y, images(test_y), test_y, pathlib.Path("synthetic"))


def run_all(settings: dict[str, Any], epsilons, seeds, data, *, log=print,
            tolerance: float = 1e-4) -> dict[str, Any]:
    """Every row at every eps and seed; the JSON document.  ``tolerance``:
    the relative precision of the central z."""
    from cepam.fl.config import FLConfig
    from cepam.fl.experiment import run_experiment

    t0 = time.perf_counter()
    calibration = [calibrate(settings, e, tolerance=tolerance) for e in epsilons]
    log(f"calibrated in {time.perf_counter() - t0:.1f} s: {calibration}")
    runs = []
    plan = [("no DP", None)] + [(row, c) for c in calibration for row in ROWS if row != "no DP"]
    for row, cal in plan:
        extra: dict[str, Any] = {}
        if cal is not None and row.startswith("cepam"):
            extra = dict(sigma=cal["sigma"])
        elif cal is not None:
            extra = dict(noise_multiplier=cal["z"])
        for seed in seeds:
            config = FLConfig(**settings, **ROWS[row], **extra, seed=seed)
            t = time.perf_counter()
            result = run_experiment(config, data)
            rows = result.rows[1:]
            runs.append({
                "row": row, "epsilon_target": None if cal is None else cal["epsilon"],
                "seed": seed, "test_acc": result.final["test_acc"],
                "bits_per_coordinate": math.fsum(r["bits_per_coordinate"] for r in rows)
                / len(rows),
                "epsilon": _json_float(result.final["client_epsilon"]),
                "mean_cohort": math.fsum(r["cohort_size"] for r in rows) / len(rows),
                "seconds": time.perf_counter() - t,
            })
            log(f"{row} eps={runs[-1]['epsilon_target']} seed {seed}: "
                f"acc {runs[-1]['test_acc']:.4f}, {runs[-1]['bits_per_coordinate']:.3f} "
                f"bits/coord, eps {runs[-1]['epsilon']}, {runs[-1]['seconds']:.1f} s")
    return {"settings": settings, "epsilons": list(epsilons), "seeds": list(seeds),
            "calibration": calibration, "runs": runs,
            "wall_seconds": time.perf_counter() - t0}


def _json_float(v: float) -> Any:
    from cepam.fl.config import json_value

    return json_value(float(v))


def _stats(doc: dict[str, Any], row: str, eps: float | None) -> tuple[float, float, float,
                                                                      float]:
    """Accuracy mean and sd, bits per coordinate and accounted eps (max over seeds)."""
    from cepam.fl.results import mean_sd

    runs = [r for r in doc["runs"] if r["row"] == row and r["epsilon_target"] == eps]
    acc, sd = mean_sd([r["test_acc"] for r in runs])
    bits = math.fsum(r["bits_per_coordinate"] for r in runs) / len(runs)
    eps_values = [math.nan if r["epsilon"] is None else
                  math.inf if r["epsilon"] == "inf" else float(r["epsilon"]) for r in runs]
    return acc, sd, bits, max(eps_values)


def _pct(mean: float, sd: float) -> str:
    return f"{100 * mean:.2f} ± {100 * sd:.2f}" if not math.isnan(sd) else f"{100 * mean:.2f}"


def render(doc: dict[str, Any]) -> str:
    """The Markdown tables of a result document (deterministic)."""
    seeds = len(doc["seeds"])
    lines = ["| Method | target eps | noise | test accuracy (%, mean ± sd, "
             f"{seeds} seed{'s' if seeds != 1 else ''}) | bits / coordinate | accounted eps |",
             "|---|---|---|---|---|---|"]
    acc, sd, bits, _ = _stats(doc, "no DP", None)
    lines.append(f"| no DP | ∞ | none | {_pct(acc, sd)} | {bits:.2f} | ∞ (no noise) |")
    for cal in doc["calibration"]:
        e = cal["epsilon"]
        for row in ROWS:
            if row == "no DP":
                continue
            acc, sd, bits, eps = _stats(doc, row, e)
            noise = (f"sigma = {cal['sigma']:.4g}" if row.startswith("cepam")
                     else f"z = {cal['z']:.4g}")
            accounted = ("same z (not accounted)" if math.isnan(eps) else f"{eps:.3f}")
            lines.append(f"| {row} | {e:g} | {noise} | {_pct(acc, sd)} | {bits:.2f} | "
                         f"{accounted} |")
    lines += ["", "| target eps | accuracy gap, cepam (auto) − central (points) | "
                  "cepam (Z) − central | bits ratio, central / cepam (auto) | "
                  "central / cepam (Z) |", "|---|---|---|---|---|"]
    for cal in doc["calibration"]:
        e = cal["epsilon"]
        central, _, cbits, _ = _stats(doc, "central DP-FedAvg", e)
        auto, _, abits, _ = _stats(doc, "cepam (auto)", e)
        zed, _, zbits, _ = _stats(doc, "cepam (Z)", e)
        lines.append(f"| {e:g} | {100 * (auto - central):+.2f} | {100 * (zed - central):+.2f} | "
                     f"{cbits / abits:.0f}× | {cbits / zbits:.0f}× |")
    s = doc["settings"]
    lines += ["", f"N = {s['population']} clients, Poisson q = {s['sample_rate']:g} "
                  f"(n = {s['clients']} expected a round; cap T = {doc['calibration'][0]['cap']}), "
                  f"{s['rounds']} rounds, delta = {s['delta']:g}, clip = {s['clip']:g}; "
                  f"measured wall time {doc['wall_seconds'] / 60:.1f} min on 2 cores."]
    return "\n".join(lines) + "\n"


def write_doc(doc: dict[str, Any], path: pathlib.Path) -> None:
    """Replaces the text between the markers of ``path`` by :func:`render`."""
    text = path.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: markers {START} / {END} not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{render(doc)}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="MNIST folder (default $CEPAM_DATA)")
    p.add_argument("--out", default=str(OUT), help="the JSON result file")
    p.add_argument("--doc", default=str(DOC), help="the Markdown file with the markers")
    p.add_argument("--render", action="store_true",
                   help="render the existing JSON into the doc; run nothing")
    p.add_argument("--tiny", action="store_true",
                   help="a seconds-long configuration on synthetic data (smoke test)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = p.parse_args(argv)
    out, doc_path = pathlib.Path(args.out), pathlib.Path(args.doc)
    if args.render:
        write_doc(json.loads(out.read_text()), doc_path)
        return 0
    import torch

    from cepam.fl.data import load_mnist
    from cepam.fl.experiment import TensorMNIST

    torch.set_num_threads(args.threads)
    if args.tiny:
        settings, epsilons, seeds = TINY, TINY_EPSILONS, TINY_SEEDS
        data = TensorMNIST(synthetic_mnist())
    else:
        settings, epsilons, seeds = SETTINGS, EPSILONS, SEEDS
        data = TensorMNIST(load_mnist(args.data_dir))
    doc = run_all(settings, epsilons, seeds, data,
                  log=lambda m: print(m, file=sys.stderr, flush=True),
                  tolerance=1e-2 if args.tiny else 1e-4)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(doc, doc_path)
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
