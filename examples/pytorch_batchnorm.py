"""FedAvg of a BatchNorm CNN on MNIST through cepam, written as README's PyTorch
quickstart writes it: each client sends its whole ``state_dict`` difference
(weights, BatchNorm running statistics and counters) as one update with one
clip, and the server adds the average of the decoded updates to its model.

It compares how the float buffers (BatchNorm's ``running_mean`` and
``running_var``) are sent (``cepam.encode(..., buffers=...)``):

* ``separate`` (cepam's default): one clip for the whole update, but the
  statistics may not push the weights' norm below 0.95 of the clip;
* ``joint``: the statistics coded as weights under the one clip (whose changes
  can be many times the weights' and then shrink the weights' update);
* ``local``: the statistics are not sent (FedBN), the server keeps its own;
* ``params``: the user sends ``model.named_parameters()`` only;
* ``nodp``: no clip, no noise, no coding: plain FedAvg of the float entries.

The clients train with minibatch SGD over one epoch of their share per round,
the data are MNIST images in [0, 1] (as ``ToTensor`` gives), and the server
evaluates the global model (in eval mode, so with its running statistics).

Usage (MNIST in ``--data`` or ``$CEPAM_DATA``; the results as JSON)::

    python examples/pytorch_batchnorm.py --data ../shared/data/mnist \\
        --rounds 20 --seeds 0 1 2 --json docs/experiments/batchnorm.json

Needs torch (``pip install torch``) and numpy; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import cepam
from cepam.fl.data import load_mnist

VARIANTS = ("separate", "joint", "local", "params", "nodp")
SIGMA, CLIP, CLIENTS, SAMPLES, BATCH, LR = 1e-3, 1.0, 3, 600, 32, 0.05


def bn_cnn() -> nn.Module:
    """A small CNN with BatchNorm after each convolution (12,906 weights)."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10))


def _data(data_dir: str | None) -> tuple[torch.Tensor, ...]:
    d = load_mnist(data_dir)
    n = CLIENTS * SAMPLES
    x = torch.tensor(d.train_images[:n], dtype=torch.float32).unsqueeze(1) / 255.0
    y = torch.tensor(d.train_labels[:n], dtype=torch.long)
    xt = torch.tensor(d.test_images[:2000], dtype=torch.float32).unsqueeze(1) / 255.0
    yt = torch.tensor(d.test_labels[:2000], dtype=torch.long)
    return x, y, xt, yt


def run(variant: str, *, seed: int = 0, rounds: int = 10, data_dir: str | None = None
        ) -> dict[str, Any]:
    """Trains the global model for ``rounds`` rounds with ``CLIENTS`` clients.

    Returns:
        ``{"variant", "seed", "accuracy": [per round, fraction], "bits_per_coordinate"}``
        (bits: the mean over the payloads of bits per coded coordinate; NaN for nodp).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    x, y, xt, yt = _data(data_dir)
    torch.manual_seed(seed)
    model = bn_cnn()
    weights = {name for name, _ in model.named_parameters()}
    secret = bytes(range(seed, seed + 32))
    accuracy, bits = [], []
    for r in range(rounds):
        updates = []
        for c in range(CLIENTS):
            local = copy.deepcopy(model)
            local.train()
            before = {k: v.clone() for k, v in local.state_dict().items()}
            opt = torch.optim.SGD(local.parameters(), lr=LR)
            xs, ys = x[c * SAMPLES:(c + 1) * SAMPLES], y[c * SAMPLES:(c + 1) * SAMPLES]
            order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(
                seed * 100_003 + r * 101 + c))
            for i in range(0, SAMPLES, BATCH):
                idx = order[i:i + BATCH]
                opt.zero_grad()
                F.cross_entropy(local(xs[idx]), ys[idx]).backward()
                opt.step()
            delta = {k: v - before[k] for k, v in local.state_dict().items()}
            if variant == "nodp":
                updates.append({k: v for k, v in delta.items() if v.is_floating_point()})
                continue
            if variant == "params":
                delta = {k: v for k, v in delta.items() if k in weights}
            codec = cepam.Codec(cepam.Gaussian(sigma=SIGMA), secret=secret, client=c, clip=CLIP,
                                buffers="separate" if variant == "params" else variant)
            payload = codec.encode(delta, round=r)
            decoded = codec.decode(payload, round=r)
            bits.append(len(payload) * 8 / sum(v.numel() for v in decoded.values()))
            updates.append(decoded)
        # (in place, running variances clamped to at least 1e-3: the noise can
        # make one negative at a privacy-level sigma)
        cepam.apply_update(model, {k: sum(u[k] for u in updates) / CLIENTS for k in updates[0]})
        model.eval()
        with torch.no_grad():
            accuracy.append(float((model(xt).argmax(1) == yt).float().mean()))
    return {"variant": variant, "seed": seed, "accuracy": accuracy,
            "bits_per_coordinate": float(np.mean(bits)) if bits else math.nan}


def table(results: list[dict[str, Any]], *, delta: float = 1e-5) -> str:
    """A Markdown table of the final accuracy (mean and std over seeds), the
    bits per coordinate and the client-level eps of each variant."""
    from cepam.accounting import client_epsilon

    rounds = len(results[0]["accuracy"])
    eps = client_epsilon(sigma=SIGMA, clip=CLIP, rounds=rounds, clients=CLIENTS, delta=delta)
    lines = [f"| buffers | accuracy after {rounds} rounds (mean ± std, {{n}} seeds) | "
             "bits per coordinate | client-level eps |", "|---|---|---|---|"]
    for variant in VARIANTS:
        runs = [r for r in results if r["variant"] == variant]
        if not runs:
            continue
        final = np.array([r["accuracy"][-1] for r in runs]) * 100
        bpc = np.mean([r["bits_per_coordinate"] for r in runs])
        lines.append(f"| {variant} | {final.mean():.1f} ± {final.std(ddof=0):.1f} % | "
                     f"{'-' if math.isnan(bpc) else f'{bpc:.2f}'} | "
                     f"{'∞ (no noise)' if variant == 'nodp' else f'{eps:.3g}'} |")
    n = len({r["seed"] for r in results})
    return "\n".join(lines).replace("{n}", str(n))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="MNIST directory (default: $CEPAM_DATA)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument("--json", default=None, help="write the per-round results here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for variant in args.variants:
        for seed in args.seeds:
            results.append(run(variant, seed=seed, rounds=args.rounds, data_dir=args.data))
            print(f"{variant} seed {seed}: accuracy {results[-1]['accuracy'][-1]:.4f}",
                  file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sigma": SIGMA, "clip": CLIP, "clients": CLIENTS, "rounds": args.rounds,
                       "results": results}, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
