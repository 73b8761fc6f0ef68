"""Length hiding rules side by side: what each costs (padded / unpadded
length) and how much its length can tell (log2 of the number of lengths it
can give), on the quickstart CNNs, the paper's MNIST models and synthetic
updates below the clip norm.

    python bench/pad_rules.py [--data-dir ../shared/data/mnist] [--quick]

Updates (float entries only, as ``cepam_mod`` sends them; ``structure=False``,
Gaussian, lattice "auto", ANS; update k's payload nonce fixed:
cepam.fl.seeds.payload_nonce of round 0, client k):

* quickstart CNN: ``examples/flower-quickstart``'s BatchNorm CNN (6,090
  floats), its settings (sigma 0.01, clip 2, 2 nodes of 3,000 MNIST images,
  one epoch of SGD with momentum, lr 0.1, batch 32), both nodes' updates in
  its 3 rounds of FedAvg (6);
* Flower's quickstart CNN: the network of Flower's PyTorch quickstart
  (LeNet-5: conv 6, conv 16, fc 120, 84, 10; 44,426 parameters on MNIST's
  1 x 28 x 28), trained the same way (6);
* the paper's MNIST MLP and CNN (bench/bitrate_mnist.py: sigma 0.001, clip
  1, 30 clients, rounds 1 and 11; 60 each);
* synthetic: Gaussian updates (m = 25,818, sigma 0.001, clip 1) at l2 norms
  1, 0.3, 0.1, 0.03 and 0, 5 of each (rms / sigma 6.2 down to 0).

Rules: none, "bucket" (quarter-octaves), "max" (max_payload_bytes), and
"levels" ladders ``count x 2^(1/q)``: ``count`` lengths, consecutive ones a
factor ``2^(1/q)`` apart, the largest max_payload_bytes
(:func:`cepam.padding.level_lengths`; ``8 x 2^(1/3)`` is ``pad="levels"``).
Per rule and update set: the mean and largest ratio padded / unpadded, and
the leak: log2 of the number of lengths the rule can give for that
configuration, counted from public parameters alone (from the fixed part of
a payload, header, sealed header, digest and tag, up to max_payload_bytes;
none and "bucket" can also exceed it).
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

import cepam
from cepam import padding
from cepam.fl.seeds import payload_nonce

ROOT = pathlib.Path(__file__).resolve().parents[1]
SECRET = bytes(range(32))
LADDERS = ((2, 1), (4, 3), (4, 2), (8, 3), (8, 4), (16, 4))  # (count, q): count x 2^(1/q)
RULES = ("none", "bucket", "max", *(f"levels {c} x 2^(1/{q})" for c, q in LADDERS))


def _padded(rule: str, unpadded: int, top: int) -> int:
    if rule == "none":
        return unpadded
    if rule == "bucket":
        return padding.bucket_length(unpadded)
    if rule == "max":
        return top
    count, q = LADDERS[RULES.index(rule) - 3]
    return min(size for size in padding.level_lengths(top, count=count, per_octave=q)
               if size >= unpadded) if unpadded <= top else unpadded


def _leak_bits(rule: str, floor: int, top: int) -> float:
    """log2 of the number of lengths ``rule`` can give from ``floor`` to ``top``."""
    if rule == "none":
        return math.log2(top - floor + 1)
    if rule == "bucket":
        return math.log2(len({padding.bucket_length(n) for n in range(floor, top + 1)}))
    if rule == "max":
        return 0.0
    count, q = LADDERS[RULES.index(rule) - 3]
    return math.log2(len(set(padding.level_lengths(top, count=count, per_octave=q))))


def measure(label: str, updates: list, sigma: float, clip: float) -> list[dict]:
    """One row per rule: mean and largest padded / unpadded over ``updates``."""
    mech = cepam.Gaussian(sigma=sigma)
    unpadded, tops, floors = [], set(), set()
    for k, u in enumerate(updates):
        kwargs = dict(secret=SECRET, round=0, client=k, clip=clip, structure=False,
                      nonce=payload_nonce(SECRET, 0, k))
        plain = cepam.encode(u, mech, pad=None, **kwargs)
        top = len(cepam.encode(u, mech, pad="max", **kwargs))
        levelled = cepam.encode(u, mech, pad="levels", **kwargs)
        info = cepam.inspect(plain, secret=SECRET)
        floors.add((info.total_bits - sum(info.body_bits.values())) // 8)
        assert len(levelled) == _padded(f"levels {padding.LEVELS} x 2^(1/"
                                        f"{padding.LEVELS_PER_OCTAVE})", len(plain), top)
        assert cepam.inspect(levelled, secret=SECRET).padding_bits == 8 * (
            len(levelled) - len(plain))
        unpadded.append(len(plain))
        tops.add(top)
    (top,), (floor,) = tops, floors  # public parameters: one of each
    m = sum(int(np.prod(v.shape)) for v in (updates[0].values() if isinstance(
        updates[0], dict) else [updates[0]]))
    rows = []
    for rule in RULES:
        padded = [_padded(rule, n, top) for n in unpadded]
        ratios = np.array(padded) / np.array(unpadded)
        rows.append(dict(updates=label, n=len(updates), m=m, rule=rule,
                         unpadded=float(np.mean(unpadded)), padded=float(np.mean(padded)),
                         mean=float(ratios.mean()), largest=float(ratios.max()),
                         seen=len(set(padded)), leak=_leak_bits(rule, floor, top), top=top))
        print(rows[-1], flush=True)
    return rows


class _LeNet:
    """Flower's PyTorch quickstart network, on MNIST's 1 x 28 x 28."""

    @staticmethod
    def build():
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv1 = nn.Conv2d(1, 6, 5)
                self.pool = nn.MaxPool2d(2, 2)
                self.conv2 = nn.Conv2d(6, 16, 5)
                self.fc1 = nn.Linear(16 * 4 * 4, 120)
                self.fc2 = nn.Linear(120, 84)
                self.fc3 = nn.Linear(84, 10)

            def forward(self, x):
                x = self.pool(F.relu(self.conv1(x)))
                x = self.pool(F.relu(self.conv2(x)))
                x = F.relu(self.fc1(x.flatten(1)))
                return self.fc3(F.relu(self.fc2(x)))

        return Net()


def quickstart_updates(build, data_dir: str | None, rounds: int = 3, nodes: int = 2) -> list:
    """Both nodes' float updates in each of ``rounds`` rounds of plain FedAvg,
    with the quickstart's data split and local training."""
    import torch

    sys.path.insert(0, str(ROOT / "examples" / "flower-quickstart"))
    from pytorchexample import task

    torch.manual_seed(0)
    model = build()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    updates = []
    for _ in range(rounds):
        locals_ = []
        for node in range(nodes):
            net = build()
            net.load_state_dict(state)
            loader, _ = task.load_data(node, nodes, 32, train_size=6000, folder=data_dir or "")
            task.train(net, loader, 1, 0.1)
            locals_.append(net.state_dict())
        floats = [k for k, v in state.items() if v.is_floating_point()]
        updates += [{k: s[k] - state[k] for k in floats} for s in locals_]
        for k in floats:
            state[k] = state[k] + sum(s[k] - state[k] for s in locals_) / nodes
    return updates


def paper_updates(model: str, data_dir: str | None) -> list:
    sys.path.insert(0, str(ROOT / "bench"))
    import bitrate_mnist as bm  # noqa: E402
    from cepam.fl.data import load_mnist

    data = load_mnist(data_dir)
    return [u for before in (0, 10) for u in bm.client_updates(model, data, before)[0]]


def synthetic_rows(count: int = 5) -> list[dict]:
    rng = np.random.default_rng(0)
    m = 25_818
    rows = []
    for norm in (1.0, 0.3, 0.1, 0.03, 0.0):
        updates = []
        for _ in range(count):
            x = rng.normal(size=m)
            updates.append((x * (norm / np.linalg.norm(x))).astype(np.float32))
        rows += measure(f"synthetic Gaussian, m = {m:,}, norm {norm:g} (clip 1)", updates,
                        1e-3, 1.0)
    return rows


def _short(label: str) -> str:
    """An update set's column name: its label up to the first comma (synthetic: its norm)."""
    return f"synthetic, {label.split(', ')[-1]}" if "norm" in label else label.split(",")[0]


def table(rows: list[dict]) -> list[str]:
    """Rules by row, update sets by column: padded / unpadded, mean and
    largest; the leak in bits (a range over the sets' configurations); the
    first rows give the unpadded and max_payload_bytes sizes."""
    sets = list(dict.fromkeys(r["updates"] for r in rows))
    first = {s: next(r for r in rows if r["updates"] == s) for s in sets}
    out = ["| rule | leak (bits) | " + " | ".join(f"{_short(s)} ({first[s]['n']})" for s in sets)
           + " |", "|---|---|" + "---|" * len(sets),
           "| (unpadded bytes, mean) | | " + " | ".join(f"{first[s]['unpadded']:,.0f}"
                                                     for s in sets) + " |",
           "| (max_payload_bytes) | | " + " | ".join(f"{first[s]['top']:,}" for s in sets) + " |"]
    for rule in RULES:
        mine = {r["updates"]: r for r in rows if r["rule"] == rule}
        low, high = (f(r["leak"] for r in mine.values()) for f in (min, max))
        leak = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}"
        out.append(f"| {rule} | {leak} | " + " | ".join(
            f"{mine[s]['mean']:.2f} / {mine[s]['largest']:.2f}" for s in sets) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="synthetic updates only")
    args = parser.parse_args()
    rows = []
    if not args.quick:
        import torch

        torch.set_num_threads(1)
        sys.path.insert(0, str(ROOT / "examples" / "flower-quickstart"))
        from pytorchexample.task import Net

        rows += measure("quickstart CNN (examples/flower-quickstart), m = 6,090",
                        quickstart_updates(Net, args.data_dir), 0.01, 2.0)
        rows += measure("Flower's quickstart CNN (LeNet-5), m = 44,426",
                        quickstart_updates(_LeNet.build, args.data_dir), 0.01, 2.0)
        rows += measure("paper MNIST CNN, m = 6,422, rounds 1, 11",
                        paper_updates("cnn", args.data_dir), 1e-3, 1.0)
        rows += measure("paper MNIST MLP, m = 25,818, rounds 1, 11",
                        paper_updates("mlp", args.data_dir), 1e-3, 1.0)
    synthetic = synthetic_rows()
    if rows:
        print("\n".join(table(rows)))
    print("\n".join(table(synthetic)))


if __name__ == "__main__":
    main()
