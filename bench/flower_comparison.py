"""cepam against Flower's own DP on the PyTorch quickstart's shape (docs/EXPERIMENTS.md).

The model, data and local training of ``examples/flower-quickstart`` (a
BatchNorm CNN on MNIST, one local epoch of momentum SGD per round), on
Flower's simulation engine, FedAvg with every node in every round, for

* ``none``: plain FedAvg (no DP, float32 replies);
* ``cepam``: ``cepam_mod`` + ``CepamStrategy`` (Gaussian, ``pad="max"``);
* ``flower-server-dp``: ``DifferentialPrivacyServerSideFixedClipping``;
* ``flower-client-dp``: ``DifferentialPrivacyClientSideFixedClipping`` +
  ``fixedclipping_mod``;

all three DP methods with the same clip and the same Gaussian noise on the
average (Flower's noise multiplier ``z = sigma sqrt(K) / clip``: std
``z clip / K = sigma / sqrt(K)``, cepam's per-client ``sigma`` averaged over
K), and reports the server's test accuracy (eval mode: BatchNorm's running
statistics as aggregated), the bytes of the arrays in a train reply, and
the client-level eps of each method.

Every method exchanges the same float-only update: the model's float
arrays (weights and BatchNorm's running statistics), not BatchNorm's
integer ``num_batches_tracked``, which Flower's fixed clipping would clip
together with the weights (its change is the number of batches a client
ran, so clipping every array to norm 2 scales the weights down 30-fold).

sigma is calibrated (``--target-eps``, default 8) so that every method is
client-level ``(eps, delta)``-DP for the weakest of the adversaries below:
one client's whole data replaced (replace-one relation), no sampling
amplification, :func:`cepam.accounting.client_epsilon`, against

* a third party that sees the released average (``aggregate``: noise
  ``sigma / sqrt(K)`` for every method);
* an honest-but-curious participating client (``client``): cepam's noise is
  added by each client, which knows its own, so ``K - 1`` clients' noise is
  hidden from it; Flower's wrappers add the noise at the server, which the
  client does not know (the ``aggregate`` figure).

No record-level eps is claimed: the local loop (minibatch epochs) is not
the paper's.

    CEPAM_DATA=/path/to/mnist python bench/flower_comparison.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "flower-quickstart"))

METHODS = ("none", "cepam", "flower-server-dp", "flower-client-dp")
STATE: dict = {}


def _apps(method: str, args: argparse.Namespace):
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.clientapp.mod import fixedclipping_mod
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideFixedClipping, DifferentialPrivacyServerSideFixedClipping,
        FedAvg,
    )

    import cepam
    from cepam.flower import CepamStrategy, cepam_mod
    from pytorchexample.task import Net, load_data, test, train

    def floats(net: Net) -> ArrayRecord:
        """The float-only update every method exchanges (no integer counters)."""
        return ArrayRecord({k: v for k, v in net.state_dict().items() if v.is_floating_point()})

    mods = {"cepam": [cepam_mod], "flower-client-dp": [fixedclipping_mod]}.get(method, [])
    client = ClientApp(mods=mods)

    @client.train()
    def _train(msg: Message, ctx: Context) -> Message:
        torch.set_num_threads(1)
        part = int(ctx.node_config["partition-id"])
        torch.manual_seed(1000 * args.seed + 10 * int(msg.content["config"]["server-round"])
                          + part)
        net = Net()
        net.load_state_dict(msg.content["arrays"].to_torch_state_dict(), strict=False)
        loader, _ = load_data(part, args.nodes, 32, train_size=args.train_size,
                              folder=args.data_dir)
        loss = train(net, loader, 1, args.lr)
        return Message(RecordDict({"arrays": floats(net),
                                   "metrics": MetricRecord({"train_loss": loss,
                                                            "num-examples": len(loader.dataset)})}),
                       reply_to=msg)

    class Measuring:
        def __init__(self, grid: Grid) -> None:
            self._grid = grid

        def __getattr__(self, name):
            return getattr(self._grid, name)

        def send_and_receive(self, messages, *, timeout=None):
            replies = list(self._grid.send_and_receive(messages, timeout=timeout))
            for r in replies:
                if not r.has_error() and r.metadata.message_type == "train":
                    STATE["bytes"].append(sum(len(a.data) for rec in r.content.array_records
                                              .values() for a in rec.values()))
            return replies

    server = ServerApp()

    @server.main()
    def _main(grid: Grid, ctx: Context) -> None:
        k = args.nodes
        inner = FedAvg(fraction_evaluate=0.0, min_train_nodes=k, min_available_nodes=k)
        z = args.sigma * math.sqrt(k) / args.clip
        if method == "cepam":  # no setting: no record-level eps (not the paper's loop)
            strategy = CepamStrategy(inner, mechanism=cepam.Gaussian(sigma=args.sigma),
                                     clip=args.clip, authenticated_transport=True, pad="max")
        elif method == "flower-server-dp":
            strategy = DifferentialPrivacyServerSideFixedClipping(inner, z, args.clip, k)
        elif method == "flower-client-dp":
            strategy = DifferentialPrivacyClientSideFixedClipping(inner, z, args.clip, k)
        else:
            strategy = inner
        _, _, x_test, y_test = __import__("pytorchexample.task", fromlist=["_mnist"])._mnist(
            args.data_dir)

        def evaluate(rnd: int, arrays: ArrayRecord):
            from torch.utils.data import DataLoader, TensorDataset

            net = Net()
            net.load_state_dict(arrays.to_torch_state_dict(), strict=False)
            _, acc = test(net, DataLoader(TensorDataset(x_test, y_test), batch_size=1000))
            return MetricRecord({"accuracy": acc})

        torch.manual_seed(args.seed)
        result = strategy.start(grid=Measuring(grid),
                                initial_arrays=floats(Net()),
                                num_rounds=args.rounds, evaluate_fn=evaluate,
                                train_config=ConfigRecord({"lr": args.lr}))
        STATE["accuracy"] = result.evaluate_metrics_serverapp[args.rounds]["accuracy"]

    return client, server


#: The adversaries of the eps columns (cepam.accounting threat models).
VIEWS = {"aggregate": "a third party seeing the average",
         "client": "an honest-but-curious participating client"}


def client_level_epsilon(method: str, view: str, args: argparse.Namespace) -> float:
    """Client-level eps (replace-one client, no sampling amplification) of a DP
    method after the run's rounds, against ``view`` (:data:`VIEWS`); nan for
    ``none``.  Flower's wrappers add their noise at the server: a client
    knows none of it, so its view is the third party's."""
    from cepam.accounting import client_epsilon

    if method == "none":
        return math.nan
    if method != "cepam":
        view = "aggregate"
    return client_epsilon(sigma=args.sigma, clip=args.clip, rounds=args.rounds,
                          clients=args.nodes, delta=args.delta, threat_model=view)


def calibrated_sigma(args: argparse.Namespace) -> float:
    """The sigma that makes every method client-level (target, delta)-DP
    against every adversary of :data:`VIEWS` (cepam against a curious client,
    the weakest view, binds)."""
    from cepam.accounting import calibrate_client_sigma

    return calibrate_client_sigma(target_epsilon=args.target_eps, target_delta=args.delta,
                                  rounds=args.rounds, clients=args.nodes, clip=args.clip,
                                  threat_model="client")


def run(method: str, args: argparse.Namespace) -> dict:
    from flwr.simulation import run_simulation

    STATE.clear()
    STATE["bytes"] = []
    client, server = _apps(method, args)
    run_simulation(server_app=server, client_app=client, num_supernodes=args.nodes,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": 2, "logging_level": logging.ERROR,
                                                 "log_to_driver": False}})
    return {"method": method, "seed": args.seed, "accuracy": STATE["accuracy"],
            "bytes_per_reply": float(np.mean(STATE["bytes"]))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--train-size", type=int, default=6000)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target-eps", type=float, default=8.0,
                        help="client-level eps every method must meet (sigma is calibrated)")
    parser.add_argument("--sigma", type=float, default=None,
                        help="the noise per client instead of --target-eps")
    parser.add_argument("--clip", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--out", default="flower_comparison.json")
    args = parser.parse_args(argv)
    if args.sigma is None:
        args.sigma = calibrated_sigma(args)
    eps = {m: {v: client_level_epsilon(m, v, args) for v in VIEWS} for m in args.methods}
    print(f"sigma = {args.sigma:.6g}; client-level eps (replace-one client, delta "
          f"{args.delta:g}, {args.rounds} rounds, no sampling amplification): "
          + "; ".join(f"{m}: " + ", ".join(f"{e[v]:.4g} against {VIEWS[v]}" for v in VIEWS)
                      for m, e in eps.items() if m != "none"), flush=True)
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            args.seed = seed
            rows.append(run(method, args))
            print(json.dumps(rows[-1]), flush=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("seed", "out")}
    Path(args.out).write_text(json.dumps(
        {"settings": settings, "client_level_epsilon": {
            "relation": "replace-one client", "delta": args.delta, "views": VIEWS,
            "by_method": {m: {v: (None if math.isnan(x) else x) for v, x in e.items()}
                          for m, e in eps.items()}},
         "rows": rows}, indent=1) + "\n")
    print(f"| method | accuracy (mean of {len(args.seeds)} seeds) | min-max | bytes per reply "
          f"| client-level eps, third party | client-level eps, curious client |")
    print("|---|---|---|---|---|---|")
    for method in args.methods:
        acc = [r["accuracy"] for r in rows if r["method"] == method]
        size = np.mean([r["bytes_per_reply"] for r in rows if r["method"] == method])
        cells = " | ".join("-" if method == "none" else f"{eps[method][v]:.4g}" for v in VIEWS)
        print(f"| {method} | {np.mean(acc):.4f} | {min(acc):.4f}-{max(acc):.4f} | {size:,.0f} "
              f"| {cells} |")


if __name__ == "__main__":
    main()
