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
the client-level eps (one client's whole contribution replaced, the
released average observed, no sampling amplification): the same for the
three DP methods, which release the same noise on the average, from
``cepam.flower.budget.Budget`` (cepam's accountant where present, else
Flower's RdpAccountant).

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
    from cepam.accounting import FLSetting
    from cepam.flower import CepamStrategy, cepam_mod
    from pytorchexample.task import Net, load_data, test, train

    mods = {"cepam": [cepam_mod], "flower-client-dp": [fixedclipping_mod]}.get(method, [])
    client = ClientApp(mods=mods)

    @client.train()
    def _train(msg: Message, ctx: Context) -> Message:
        torch.set_num_threads(1)
        part = int(ctx.node_config["partition-id"])
        torch.manual_seed(1000 * args.seed + 10 * int(msg.content["config"]["server-round"])
                          + part)
        net = Net()
        net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        loader, _ = load_data(part, args.nodes, 32, train_size=args.train_size,
                              folder=args.data_dir)
        loss = train(net, loader, 1, args.lr)
        return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()),
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
        setting = FLSetting(clip=args.clip, clients=k, local_steps=1, dataset_size=2,
                            threat_model="aggregate")
        if method == "cepam":
            strategy = CepamStrategy(inner, mechanism=cepam.Gaussian(sigma=args.sigma),
                                     clip=args.clip, setting=setting,
                                     authenticated_transport=True)
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
            net.load_state_dict(arrays.to_torch_state_dict())
            _, acc = test(net, DataLoader(TensorDataset(x_test, y_test), batch_size=1000))
            return MetricRecord({"accuracy": acc})

        torch.manual_seed(args.seed)
        result = strategy.start(grid=Measuring(grid),
                                initial_arrays=ArrayRecord(Net().state_dict()),
                                num_rounds=args.rounds, evaluate_fn=evaluate,
                                train_config=ConfigRecord({"lr": args.lr}))
        STATE["accuracy"] = result.evaluate_metrics_serverapp[args.rounds]["accuracy"]

    return client, server


def client_level_epsilon(args: argparse.Namespace) -> float:
    """The client-level eps of a DP run (same noise on the average for all)."""
    import cepam
    from cepam.accounting import FLSetting
    from cepam.flower.budget import Budget

    setting = FLSetting(clip=args.clip, clients=args.nodes, local_steps=1, dataset_size=2,
                        threat_model="aggregate")
    budget = Budget(cepam.Gaussian(sigma=args.sigma), setting, delta=args.delta,
                    bound="tight")
    for _ in range(args.rounds):
        budget.rounds.append(args.nodes)
        budget._compose_client_level(args.nodes)
    eps = budget.client_level_epsilon()
    return math.nan if eps is None else eps


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
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument("--clip", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--out", default="flower_comparison.json")
    args = parser.parse_args(argv)
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            args.seed = seed
            rows.append(run(method, args))
            print(json.dumps(rows[-1]), flush=True)
    eps = client_level_epsilon(args)
    settings = {k: v for k, v in vars(args).items() if k not in ("seed", "out")}
    Path(args.out).write_text(json.dumps({"settings": settings, "client_level_epsilon": eps,
                                          "rows": rows}, indent=1) + "\n")
    print(f"| method | accuracy (mean of {len(args.seeds)} seeds) | min-max | bytes per reply "
          f"| client-level eps |")
    print("|---|---|---|---|---|")
    for method in args.methods:
        acc = [r["accuracy"] for r in rows if r["method"] == method]
        size = np.mean([r["bytes_per_reply"] for r in rows if r["method"] == method])
        print(f"| {method} | {np.mean(acc):.4f} | {min(acc):.4f}-{max(acc):.4f} | {size:,.0f} "
              f"| {'-' if method == 'none' else f'{eps:.4g}'} |")


if __name__ == "__main__":
    main()
