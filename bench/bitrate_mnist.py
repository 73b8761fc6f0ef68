"""Bitrate on real model updates: MNIST MLP and CNN, 30 IID clients of 1,666
samples, 15 single-sample local SGD steps (momentum 0.9, lr 0.01) from the
initial model and from the model after 10 rounds of plain FedAvg; each
client's update clipped to l2 norm 1 as a whole and coded at the paper's
sigma = 0.001.  Bits per coordinate are whole payloads averaged over the 30
clients (client k's payload nonce fixed: cepam.fl.seeds.payload_nonce of
round 0, client k).  Writes docs/bitrate/mnist.md.

    python bench/bitrate_mnist.py [--data-dir ../shared/data/mnist]
"""

from __future__ import annotations

import argparse
import math
import pathlib

import numpy as np
import torch

import cepam
from cepam.fl.data import load_mnist, normalize
from cepam.fl.models import build_model
from cepam.fl.seeds import payload_nonce
from cepam.fl.training import ClientData, LocalTrainer

SIGMA, CLIP, K, PER_CLIENT, TAU, LR = 1e-3, 1.0, 30, 1666, 15, 0.01
SCHEMES = {
    "CEPAM Z (n=1), ans": dict(lattice="Z", dim=1, coder="ans"),
    "CEPAM Z (n=1), golomb": dict(lattice="Z", dim=1, coder="golomb"),
    "CEPAM Z^2, ans": dict(lattice="Z", dim=2, coder="ans"),
    "CEPAM Z^3, ans": dict(lattice="Z", dim=3, coder="ans"),
    "CEPAM A2, ans": dict(lattice="A2"),
    "CEPAM D4, ans": dict(lattice="D4"),
    "CEPAM E8, ans": dict(lattice="E8"),
    "CEPAM auto, ans": dict(),
}


def client_updates(model_name: str, data, rounds_before: int) -> tuple[list[dict], float]:
    torch.manual_seed(0)
    model = build_model(model_name, seed=0)
    x = normalize(data.train_images[:50_000])
    y = torch.from_numpy(data.train_labels[:50_000].astype(np.int64))
    perm = np.random.default_rng(0).permutation(50_000)
    clients = ClientData([perm[k * PER_CLIENT:(k + 1) * PER_CLIENT] for k in range(K)])
    trainer = LocalTrainer(model)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    for r in range(rounds_before + 1):
        idx = clients.sample(0, r, TAU, 1)
        local, _ = trainer.train(params, x[idx], y[idx], LR)
        updates = [{n: local[n][k] - params[n] for n in params} for k in range(K)]
        if r < rounds_before:  # plain FedAvg to reach a later stage of training
            params = {n: params[n] + sum(u[n] for u in updates) / K for n in params}
    norms = [math.sqrt(sum(float((v ** 2).sum()) for v in u.values())) for u in updates]
    return updates, float(np.median(norms))


def measure(updates: list[dict]) -> dict[str, float]:
    secret = bytes(range(32))
    m = sum(v.numel() for v in updates[0].values())
    out = {}
    for name, kwargs in SCHEMES.items():
        bits = [8 * len(cepam.encode(u, cepam.Gaussian(sigma=SIGMA), secret=secret, round=0,
                                     client=k, clip=CLIP, nonce=payload_nonce(secret, 0, k),
                                     **kwargs))
                for k, u in enumerate(updates)]
        out[name] = float(np.mean(bits)) / m
    sdq = cepam.SDQ.matching(SIGMA)
    bits = [8 * len(cepam.encode_sdq(u, step=sdq.step, secret=secret, round=0, client=k,
                                     clip=CLIP, nonce=payload_nonce(secret, 0, k)))
            for k, u in enumerate(updates)]
    out["scalar SDQ, same variance (no privacy)"] = float(np.mean(bits)) / m
    bits = [8 * len(cepam.encode_noisy_sdq(u, cepam.Gaussian(sigma=SIGMA), step=sdq.step,
                                           rng=np.random.default_rng(k), secret=secret,
                                           round=0, client=k, clip=CLIP,
                                           nonce=payload_nonce(secret, 0, k)))
            for k, u in enumerate(updates)]
    out["Gaussian+SDQ (error variance 2 sigma^2)"] = float(np.mean(bits)) / m
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1]
                                              / "docs" / "bitrate" / "mnist.md"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_mnist(args.data_dir)
    columns, rows, notes = [], {}, []
    for model in ("mlp", "cnn"):
        for before in (0, 10):
            updates, norm = client_updates(model, data, before)
            label = f"{model.upper()}, round {before + 1}"
            columns.append(label)
            m = sum(v.numel() for v in updates[0].values())
            rms = min(norm, CLIP) / math.sqrt(m)
            notes.append(f"{label}: {m:,} coordinates, median update norm {norm:.3g} "
                         f"(clipped to {CLIP:g}), RMS / sigma = {rms / SIGMA:.2f}")
            for scheme, bpc in measure(updates).items():
                rows.setdefault(scheme, []).append(bpc)
            print(notes[-1], flush=True)
    intro = " ".join(__doc__.split("\n\n")[0].split())
    lines = ["# Bitrate on MNIST model updates", "", intro,
             "", *[f"* {n}" for n in notes], "",
             "| scheme | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    lines += [f"| {s} | " + " | ".join(f"{v:.3f}" for v in vals) + " |" for s, vals in rows.items()]
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
