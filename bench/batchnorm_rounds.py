"""BatchNorm under a real clip, round by round: what the server's model
(evaluated in eval mode, with the running statistics it holds) reaches when
the clients send their BatchNorm CNN's update in each of the ways cepam
offers, and with GroupNorm instead.

Setting (issue 38): a small CNN with BatchNorm after each convolution, 3
clients with a share of MNIST each (images in [0, 1], as torchvision's
``ToTensor`` gives), one local epoch of minibatch SGD with momentum a round,
the whole ``state_dict`` difference sent as README's PyTorch quickstart sends
it (one ``cepam.Codec`` per client, ``clip = 1``); the server adds the average
of the decoded updates to its model and evaluates it on the MNIST test set.

Rows (``VARIANTS``):

* ``default``: ``buffers="separate"``, cepam's default: the running
  statistics coded with the weights, clipped apart from them;
* ``parameters only``: only ``named_parameters()`` are sent; the server keeps
  its own (initial, stale) running statistics;
* ``local``: ``buffers="local"`` (FedBN): the statistics stay on the clients,
  each keeps its own from round to round; the server's model keeps its
  initial ones.  ``local, clients' statistics`` is the same run evaluated
  as FedBN means it: the server's weights with each client's own running
  statistics (the mean over the clients);
* ``default before (floor 0.5)``: the default as it was before
  ``cepam.statistics_clip.WEIGHT_FLOOR`` went from 0.5 to 0.95 (the weights kept only
  half the clip while the statistics were large), at ``sigma = 1e-3`` only;
* ``GroupNorm``: the same CNN with ``GroupNorm`` (no running statistics)
  in place of BatchNorm, its whole ``state_dict`` difference sent.

Each row runs at ``sigma = 1e-3`` (the issue's setting; no privacy) and at the
sigma that :func:`cepam.accounting.client_epsilon` calibrates to a
client-level eps target (replace-one client, honest-but-curious client,
delta 1e-5).  The server clamps the decoded running variances at 0
(post-processing).

    python bench/batchnorm_rounds.py --data ../shared/data/mnist   # JSON + doc table
    python bench/batchnorm_rounds.py --render                      # the table only

``--cohort`` runs instead ``COHORT_VARIANTS`` with about 100 clients a round
(a population of 600, Poisson sampling at q = 1/6, add/remove, client-level
eps 8; ``COHORT_SETTINGS``, :func:`run_cohort`), writes
bench/results/batchnorm_cohort.json and renders its table between the
``batchnorm-cohort`` markers.

Writes bench/results/batchnorm_rounds.json and renders the table into
docs/EXPERIMENTS.md between the ``batchnorm-rounds`` marker comments
(tests/docs/test_batchnorm_rounds_table.py checks that they match).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import pathlib
import sys
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "batchnorm_rounds.json"
DOC = ROOT / "docs" / "EXPERIMENTS.md"
START, END = "<!-- batchnorm-rounds:start -->", "<!-- batchnorm-rounds:end -->"

#: Training settings shared by every row.
SETTINGS: dict[str, Any] = dict(clients=3, samples=1000, test_size=2000, batch=32, lr=0.05,
                                momentum=0.9, clip=1.0, rounds=15, delta=1e-5)
#: The rows; "local" yields two (the server's statistics, the clients' own).
VARIANTS = ("default", "default before (floor 0.5)", "parameters only", "local", "GroupNorm")
#: The issue's noise (no privacy), then the sigma calibrated to EPS_TARGET.
SIGMA = 1e-3
EPS_TARGET = 1000.0
SEEDS = (0,)
#: The CNN's size (either norm), the scale of an update's coordinate at the clip.
CNN_SIZE = 12_906


def cnn(norm: str = "batch"):
    """The CNN: two 3x3 convolutions each followed by BatchNorm (``norm=
    "batch"``) or GroupNorm with 4 groups (``"group"``), ReLU and 2x2 max
    pooling, then a linear layer (12,906 weights either way)."""
    from torch import nn

    def layer(channels: int):
        return nn.BatchNorm2d(channels) if norm == "batch" else nn.GroupNorm(4, channels)

    return nn.Sequential(
        nn.Conv2d(1, 16, 3), layer(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), layer(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10))


def mnist_tensors(data_dir: str | None, *, clients: int, samples: int, test_size: int):
    """The first ``clients * samples`` training images and the first
    ``test_size`` test images as float32 tensors (N, 1, 28, 28) in [0, 1],
    with their labels."""
    import torch

    from cepam.fl.data import load_mnist

    d = load_mnist(data_dir)
    n = clients * samples

    def images(a: np.ndarray):
        return torch.tensor(a, dtype=torch.float32).unsqueeze(1) / 255.0

    return (images(d.train_images[:n]), torch.tensor(d.train_labels[:n]),
            images(d.test_images[:test_size]), torch.tensor(d.test_labels[:test_size]))


def _accuracy(model, x, y) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _local_update(local, xs, ys, *, batch: int, lr: float, momentum: float,
                  generator) -> dict[str, Any]:
    """One local epoch of minibatch SGD with momentum on ``local`` (in place,
    train mode) over ``xs, ys`` in the order ``generator`` draws; returns the
    ``state_dict`` difference (after minus before)."""
    import torch
    import torch.nn.functional as F

    local.train()
    before = {k: v.clone() for k, v in local.state_dict().items()}
    opt = torch.optim.SGD(local.parameters(), lr=lr, momentum=momentum)
    order = torch.randperm(len(xs), generator=generator)
    for i in range(0, len(xs), batch):
        idx = order[i:i + batch]
        opt.zero_grad()
        F.cross_entropy(local(xs[idx]), ys[idx]).backward()
        opt.step()
    return {k: v - before[k] for k, v in local.state_dict().items()}


def run(variant: str, data: tuple, *, sigma: float, seed: int = 0, clients: int, samples: int,
        batch: int, lr: float, momentum: float, clip: float, rounds: int,
        **_: Any) -> dict[str, Any]:
    """Trains the server's model ``rounds`` rounds in the way ``variant``
    sends the update (one of ``VARIANTS``).

    Args:
        data: :func:`mnist_tensors`' four tensors.
        sigma: cepam's noise, per coordinate, on each client's update.
        seed: the model's initialisation, the minibatch order and the secret.
        the rest: as ``SETTINGS``.

    Returns:
        ``{"variant", "seed", "sigma", "accuracy": [per round], "local_accuracy":
        [per round, the clients' own statistics; "local" only]}``: fractions of
        the test images.
    """
    import torch

    import cepam
    import cepam.statistics_clip
    from cepam.structure import is_buffer

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    if variant.startswith("default before"):
        floor, cepam.statistics_clip.WEIGHT_FLOOR = cepam.statistics_clip.WEIGHT_FLOOR, 0.5
        try:
            return dict(run("default", data, sigma=sigma, seed=seed, clients=clients,
                            samples=samples, batch=batch, lr=lr, momentum=momentum, clip=clip,
                            rounds=rounds), variant=variant)
        finally:
            cepam.statistics_clip.WEIGHT_FLOOR = floor
    x, y, xt, yt = data
    torch.manual_seed(seed)
    model = cnn("group" if variant == "GroupNorm" else "batch")
    weights = {name for name, _ in model.named_parameters()}
    buffers = "local" if variant == "local" else "separate"
    own = [copy.deepcopy(model) for _ in range(clients)]  # FedBN: each client's statistics
    secret = bytes(range(seed, seed + 32))
    out: dict[str, Any] = {"variant": variant, "seed": seed, "sigma": sigma, "accuracy": []}
    if variant == "local":
        out["local_accuracy"] = []
    for r in range(rounds):
        updates = []
        for c in range(clients):
            local = copy.deepcopy(model)
            if variant == "local":  # the client's own running statistics, not the server's
                local.load_state_dict({k: v for k, v in own[c].state_dict().items()
                                       if is_buffer(k) or k.endswith("num_batches_tracked")},
                                      strict=False)
            delta = _local_update(local, x[c * samples:(c + 1) * samples],
                                  y[c * samples:(c + 1) * samples], batch=batch, lr=lr,
                                  momentum=momentum, generator=torch.Generator().manual_seed(
                                      seed * 100_003 + r * 101 + c))
            own[c] = local
            if variant == "parameters only":
                delta = {k: v for k, v in delta.items() if k in weights}
            codec = cepam.Codec(cepam.Gaussian(sigma=sigma), secret=secret, client=c, clip=clip,
                                buffers=buffers)
            updates.append(codec.decode(codec.encode(delta, round=r), round=r))
        state = {k: v.clone() for k, v in model.state_dict().items()}
        for k in updates[0]:
            state[k] += sum(u[k] for u in updates) / clients
            if k.endswith("running_var"):  # post-processing: a variance is not negative
                state[k].clamp_(min=0.0)
        model.load_state_dict(state)
        out["accuracy"].append(_accuracy(model, xt, yt))
        if variant == "local":
            accs = []
            for c in range(clients):
                mine = copy.deepcopy(model)
                mine.load_state_dict({k: v for k, v in own[c].state_dict().items()
                                      if is_buffer(k)}, strict=False)
                accs.append(_accuracy(mine, xt, yt))
            out["local_accuracy"].append(float(np.mean(accs)))
    return out


def calibrated_sigma(settings: dict[str, Any], eps: float = EPS_TARGET) -> float:
    """The sigma for client-level ``eps`` after the run's rounds
    (replace-one client, honest-but-curious client, at the run's delta)."""
    from cepam.accounting import calibrate_client_sigma

    return calibrate_client_sigma(target_epsilon=eps, target_delta=settings["delta"],
                                  rounds=settings["rounds"], clients=settings["clients"],
                                  clip=settings["clip"])


#: The cohort setting (``--cohort``): a population of 600 clients with 100
#: images each (all 60,000 training images), Poisson sampling at rate 1/6
#: (about 100 clients a round), add/remove, client-level eps 8.
COHORT_SETTINGS: dict[str, Any] = dict(population=600, clients=100, sample_rate=1 / 6,
                                       relation="add-remove", samples=100, test_size=2000,
                                       batch=32, lr=0.05, momentum=0.9, clip=1.0, rounds=15,
                                       delta=1e-5)
COHORT_VARIANTS = ("default", "parameters only", "GroupNorm")
COHORT_EPS_TARGET = 8.0
COHORT_OUT = ROOT / "bench" / "results" / "batchnorm_cohort.json"
COHORT_START, COHORT_END = "<!-- batchnorm-cohort:start -->", "<!-- batchnorm-cohort:end -->"


def _cohort_config(settings: dict[str, Any], sigma: float, seed: int):
    """The cepam.fl configuration of the cohort setting, for its sampler and
    its server-side aggregation (top-up noise, fixed denominator)."""
    from cepam.fl.config import FLConfig

    return FLConfig(method="cepam-gaussian", sigma=sigma, clip=settings["clip"],
                    clients=settings["clients"], population=settings["population"],
                    sample_rate=settings["sample_rate"], relation=settings["relation"],
                    rounds=settings["rounds"], delta=settings["delta"], seed=seed)


def cohort_accounting(settings: dict[str, Any], sigma: float | None = None) -> dict[str, Any]:
    """The cohort setting's accounting: ``sigma`` (calibrated to
    ``COHORT_EPS_TARGET`` when None), the client-level eps after its rounds
    (add/remove client, honest-but-curious client, at its delta), the cap
    ``T`` and the std of the noise on the released average with a full cap
    (``sigma sqrt(T) / clients``)."""
    from cepam.accounting import calibrate_client_sigma, client_epsilon, cohort_cap

    common = dict(clients=settings["clients"], clip=settings["clip"],
                  sample_rate=settings["sample_rate"], relation=settings["relation"])
    if sigma is None:
        sigma = calibrate_client_sigma(target_epsilon=COHORT_EPS_TARGET,
                                       target_delta=settings["delta"],
                                       rounds=settings["rounds"], **common)
    cap = cohort_cap(clients=settings["clients"], sample_rate=settings["sample_rate"])
    eps = client_epsilon(sigma=sigma, rounds=settings["rounds"], delta=settings["delta"],
                         **common)
    return {"sigma": sigma, "epsilon": eps, "cap": cap,
            "average_noise": sigma * math.sqrt(cap) / settings["clients"]}


def run_cohort(variant: str, data: tuple, *, sigma: float, seed: int = 0, population: int,
               clients: int, sample_rate: float, relation: str, samples: int, batch: int,
               lr: float, momentum: float, clip: float, rounds: int, delta: float,
               **_: Any) -> dict[str, Any]:
    """Trains the server's model ``rounds`` rounds with a Poisson cohort a
    round, ``variant`` one of ``COHORT_VARIANTS``.

    Each round the server draws the cohort with its seeded Generator
    (:func:`cepam.fl.builtin_engine.sample_cohort`); each sampled client
    trains one local epoch from the global model and sends its update
    through its own ``cepam.Codec`` (``clip``, noise ``sigma``); the server
    adds top-up noise ``N(0, (T - k) sigma^2)`` per coordinate to the sum of
    the ``k`` decoded updates and divides by ``clients``
    (:func:`cepam.fl.builtin_engine.aggregate`; an empty cohort releases
    the top-up noise alone), clamps the running variances at 0 and adds the
    result to its model.

    Args:
        data: :func:`mnist_tensors`' four tensors (``population * samples``
            training images, client ``c`` holding the ``c``-th block).
        sigma: cepam's noise, per coordinate, on each client's update.
        seed: the model's initialisation, the cohorts, the minibatch order,
            the server's noise and the secret.
        the rest: as ``COHORT_SETTINGS``.

    Returns:
        ``{"variant", "seed", "sigma", "accuracy": [per round, fractions of the
        test images], "cohort": [k per round], "min_running_var": [per round,
        the smallest running variance the server holds after the clamp;
        BatchNorm rows only]}``.
    """
    import torch

    import cepam
    from cepam.accounting import cohort_cap
    from cepam.fl.builtin_engine import aggregate, sample_cohort
    from cepam.fl.seeds import torch_generator

    if variant not in COHORT_VARIANTS:
        raise ValueError(f"variant must be one of {COHORT_VARIANTS}")
    settings = dict(population=population, clients=clients, sample_rate=sample_rate,
                    relation=relation, clip=clip, rounds=rounds, delta=delta)
    config = _cohort_config(settings, sigma, seed)
    cap = cohort_cap(clients=clients, sample_rate=sample_rate)
    x, y, xt, yt = data
    torch.manual_seed(seed)
    model = cnn("group" if variant == "GroupNorm" else "batch")
    weights = {name for name, _ in model.named_parameters()}
    sent = [k for k, v in model.state_dict().items()
            if v.is_floating_point() and (variant != "parameters only" or k in weights)]
    secret = bytes(range(seed, seed + 32))
    out: dict[str, Any] = {"variant": variant, "seed": seed, "sigma": sigma, "accuracy": [],
                           "cohort": []}
    for r in range(rounds):
        cohort = sample_cohort(config, r)
        total = {k: torch.zeros_like(model.state_dict()[k]) for k in sent}
        for c in cohort:
            local = copy.deepcopy(model)
            delta_ = _local_update(local, x[c * samples:(c + 1) * samples],
                                   y[c * samples:(c + 1) * samples], batch=batch, lr=lr,
                                   momentum=momentum,
                                   generator=torch_generator(seed, "batches", r, c))
            codec = cepam.Codec(cepam.Gaussian(sigma=sigma), secret=secret, client=c,
                                clip=clip)
            update = codec.decode(codec.encode({k: delta_[k] for k in sent}, round=r),
                                  round=r)
            for k in sent:
                total[k] += update[k]
        released = aggregate(config, total, k=len(cohort), t=r, clip=clip, cap=cap,
                             sigma=sigma)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        variances = []
        for k in sent:
            state[k] += released[k]
            if k.endswith("running_var"):  # post-processing: a variance is not negative
                state[k].clamp_(min=0.0)
                variances.append(state[k])
        model.load_state_dict(state)
        out["accuracy"].append(_accuracy(model, xt, yt))
        out["cohort"].append(len(cohort))
        if variances:  # the server's smallest running variance (a diagnostic)
            out.setdefault("min_running_var", []).append(float(torch.cat(variances).min()))
    return out


def render_cohort(doc: dict[str, Any]) -> str:
    """The Markdown table of the cohort setting: accuracy (%) per round, one
    row per variant, and the cohort sizes."""
    s = doc["settings"]
    a = cohort_accounting(s, doc["sigma"])
    rounds = s["rounds"]
    seeds = ", ".join(map(str, doc["seeds"]))
    out = [f"sigma = {a['sigma']:.4g} per coordinate on each update: client-level eps "
           f"{a['epsilon']:.3g} after {rounds} rounds (add-remove client, honest-but-curious "
           f"client, delta = {s['delta']:g}; Poisson sampling q = {s['sample_rate']:.4g} of "
           f"N = {s['population']}, top-up to T = {a['cap']}, divided by n = {s['clients']}: "
           f"noise {a['average_noise']:.2g} a coordinate on the average, against "
           f"{s['clip'] / math.sqrt(CNN_SIZE):.2g} for one update at the clip); accuracy (%) of "
           f"the server's model in eval mode on {s['test_size']:,} test images, seed(s) "
           f"{seeds} (mean)\n",
           "| rows / round | " + " | ".join(str(r + 1) for r in range(rounds)) + " |",
           "|---" * (rounds + 1) + "|"]
    for variant in COHORT_VARIANTS:
        runs = [r for r in doc["runs"] if r["variant"] == variant]
        if runs:
            accuracy = np.mean([r["accuracy"] for r in runs], axis=0)
            out.append(f"| {variant} | " + " | ".join(f"{100 * v:.0f}" for v in accuracy)
                       + " |")
    first = [r for r in doc["runs"] if r["seed"] == doc["seeds"][0]][0]
    out.append(f"| cohort k (seed {first['seed']}) | "
               + " | ".join(str(k) for k in first["cohort"]) + " |")
    out.append("")
    return "\n".join(out)


def _rows(doc: dict[str, Any], sigma: float) -> list[tuple[str, list[float]]]:
    """(row name, mean accuracy per round over the seeds) for each row at ``sigma``."""
    rows = []
    for variant in VARIANTS:
        runs = [r for r in doc["runs"] if r["variant"] == variant and r["sigma"] == sigma]
        if not runs:
            continue
        rows.append((variant, np.mean([r["accuracy"] for r in runs], axis=0).tolist()))
        if variant == "local":
            rows.append(("local, clients' statistics",
                         np.mean([r["local_accuracy"] for r in runs], axis=0).tolist()))
    return rows


def render(doc: dict[str, Any]) -> str:
    """The Markdown tables (one per sigma) of the mean accuracy (%) per round."""
    from cepam.accounting import client_epsilon

    s = doc["settings"]
    rounds = s["rounds"]
    out = []
    for sigma in doc["sigmas"]:
        eps = client_epsilon(sigma=sigma, clip=s["clip"], rounds=rounds, clients=s["clients"],
                             delta=s["delta"])
        out.append(f"sigma = {sigma:.4g}: client-level eps {eps:.3g} after {rounds} rounds "
                   f"(replace-one client, honest-but-curious client, delta = {s['delta']:g}); "
                   f"accuracy (%) of the server's model in eval mode on "
                   f"{s['test_size']:,} test images, seed(s) "
                   f"{', '.join(map(str, doc['seeds']))} (mean)\n")
        out.append("| rows / round | " + " | ".join(str(r + 1) for r in range(rounds)) + " |")
        out.append("|---" * (rounds + 1) + "|")
        for name, accuracy in _rows(doc, sigma):
            out.append(f"| {name} | " + " | ".join(f"{100 * a:.0f}" for a in accuracy) + " |")
        out.append("")
    return "\n".join(out)


def write_doc(doc: dict[str, Any], path: pathlib.Path = DOC, *, cohort: bool = False) -> None:
    """Renders ``doc`` (the 3-client result, or the cohort one when
    ``cohort``) into ``path`` between its markers."""
    start, end = (COHORT_START, COHORT_END) if cohort else (START, END)
    text = path.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{path}: markers {start} / {end} not found")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{(render_cohort if cohort else render)(doc)}{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="MNIST directory (default: $CEPAM_DATA)")
    p.add_argument("--render", action="store_true",
                   help="only render the JSON's table into the doc")
    p.add_argument("--cohort", action="store_true",
                   help="the cohort setting (COHORT_SETTINGS: 100 of 600 clients a round, "
                        "eps 8) instead of the 3 clients")
    p.add_argument("--out", default=None,
                   help=f"result file (default: {OUT.name}, or {COHORT_OUT.name} with --cohort)")
    p.add_argument("--doc", default=str(DOC))
    args = p.parse_args(argv)
    out = pathlib.Path(args.out or (COHORT_OUT if args.cohort else OUT))
    if args.render:
        write_doc(json.loads(out.read_text()), pathlib.Path(args.doc), cohort=args.cohort)
        return 0
    import torch

    torch.set_num_threads(1)
    if args.cohort:
        return _main_cohort(args.data, out, pathlib.Path(args.doc))
    settings = dict(SETTINGS)
    data = mnist_tensors(args.data, clients=settings["clients"], samples=settings["samples"],
                         test_size=settings["test_size"])
    sigmas = [SIGMA, calibrated_sigma(settings)]
    doc: dict[str, Any] = {"settings": settings, "sigmas": sigmas, "eps_target": EPS_TARGET,
                           "seeds": list(SEEDS), "runs": []}
    for sigma in sigmas:
        for variant in VARIANTS:
            if variant.startswith("default before") and sigma != SIGMA:
                continue
            for seed in SEEDS:
                result = run(variant, data, sigma=sigma, seed=seed, **settings)
                doc["runs"].append(result)
                print(f"sigma {sigma:.4g} {variant} seed {seed}: "
                      + " ".join(f"{a:.2f}" for a in result["accuracy"]), file=sys.stderr,
                      flush=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(doc, pathlib.Path(args.doc))
    print(render(doc))
    return 0


def _main_cohort(data_dir: str | None, out: pathlib.Path, doc_path: pathlib.Path) -> int:
    """Runs ``COHORT_VARIANTS`` in the cohort setting, writes ``out`` and the table."""
    import time

    settings = dict(COHORT_SETTINGS)
    data = mnist_tensors(data_dir, clients=settings["population"], samples=settings["samples"],
                         test_size=settings["test_size"])
    accounting = cohort_accounting(settings)
    if accounting["epsilon"] > COHORT_EPS_TARGET:
        raise SystemExit(f"accounted eps {accounting['epsilon']} above {COHORT_EPS_TARGET}")
    doc: dict[str, Any] = {"settings": settings, "sigma": accounting["sigma"],
                           "epsilon": accounting["epsilon"], "eps_target": COHORT_EPS_TARGET,
                           "cap": accounting["cap"], "seeds": list(SEEDS), "runs": []}
    for variant in COHORT_VARIANTS:
        for seed in SEEDS:
            start = time.perf_counter()
            result = run_cohort(variant, data, sigma=accounting["sigma"], seed=seed, **settings)
            result["seconds"] = round(time.perf_counter() - start, 1)
            doc["runs"].append(result)
            print(f"cohort {variant} seed {seed} ({result['seconds']} s): "
                  + " ".join(f"{a:.2f}" for a in result["accuracy"]), file=sys.stderr,
                  flush=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(doc, doc_path, cohort=True)
    print(render_cohort(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
