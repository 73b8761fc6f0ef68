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
  ``cepam.codec.WEIGHT_FLOOR`` went from 0.5 to 0.95 (the weights kept only
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
    import torch.nn.functional as F

    import cepam
    import cepam.codec
    from cepam.structure import is_buffer

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    if variant.startswith("default before"):
        floor, cepam.codec.WEIGHT_FLOOR = cepam.codec.WEIGHT_FLOOR, 0.5
        try:
            return dict(run("default", data, sigma=sigma, seed=seed, clients=clients,
                            samples=samples, batch=batch, lr=lr, momentum=momentum, clip=clip,
                            rounds=rounds), variant=variant)
        finally:
            cepam.codec.WEIGHT_FLOOR = floor
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
            local.train()
            before = {k: v.clone() for k, v in local.state_dict().items()}
            opt = torch.optim.SGD(local.parameters(), lr=lr, momentum=momentum)
            xs, ys = x[c * samples:(c + 1) * samples], y[c * samples:(c + 1) * samples]
            order = torch.randperm(samples, generator=torch.Generator().manual_seed(
                seed * 100_003 + r * 101 + c))
            for i in range(0, samples, batch):
                idx = order[i:i + batch]
                opt.zero_grad()
                F.cross_entropy(local(xs[idx]), ys[idx]).backward()
                opt.step()
            own[c] = local
            delta = {k: v - before[k] for k, v in local.state_dict().items()}
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


def write_doc(doc: dict[str, Any], path: pathlib.Path = DOC) -> None:
    text = path.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: markers {START} / {END} not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{render(doc)}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="MNIST directory (default: $CEPAM_DATA)")
    p.add_argument("--render", action="store_true",
                   help="only render the JSON's table into the doc")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--doc", default=str(DOC))
    args = p.parse_args(argv)
    if args.render:
        write_doc(json.loads(pathlib.Path(args.out).read_text()), pathlib.Path(args.doc))
        return 0
    import torch

    torch.set_num_threads(1)
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
    pathlib.Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    write_doc(doc, pathlib.Path(args.doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
