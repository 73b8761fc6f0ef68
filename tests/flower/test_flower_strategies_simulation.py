"""Every Flower strategy behind CepamStrategy, on Flower's simulation engine (Ray).

One ``run_simulation`` whose ServerApp runs nine Message-API strategies of
flwr 1.42 one after the other on the same Grid (one Ray start for all):
FedAvg, FedAvgM, FedProx, FedAdam, FedYogi, FedAdagrad, FedMedian,
FedTrimmedAvg and Krum, each wrapped by ``CepamStrategy`` (X25519 key
agreement, the default padding), three rounds each.  Three SuperNodes train
test_flower_simulation's softmax regression through ``cepam_mod`` as a
PyTorch client does: its model is float32 whatever arrives (as
``load_state_dict`` copies into float32 parameters), so an aggregate that
came back float64 (FedAdam, FedYogi and FedAdagrad compute in float64)
would make every reply change dtype and be refused.  Checked for every
strategy and round: the round is released (``cepam-updates`` = 3,
``cepam-dropped`` = 0), the aggregate handed to the next round is float32
with finite values and moved, and every train reply is a payload.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")
pytest.importorskip("cryptography")

# One Flower simulation on Ray (its start-up alone takes tens of seconds):
# the slow step of CI (python -m pytest -m slow).
pytestmark = pytest.mark.slow

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import (  # noqa: E402
    FedAdagrad, FedAdam, FedAvg, FedAvgM, FedMedian, FedProx, FedTrimmedAvg, FedYogi, Krum,
)

import cepam  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from helpers.grids import ObservedGrid, simulate  # noqa: E402
from test_flower_simulation import initial_model, local_steps  # noqa: E402

NODES, ROUNDS, SIGMA, CLIP = 3, 3, 0.01, 1.0
NODE_ARGS = dict(fraction_evaluate=0.0, min_available_nodes=NODES, min_train_nodes=NODES)
STRATEGIES = {
    "FedAvg": lambda: FedAvg(**NODE_ARGS),
    "FedAvgM": lambda: FedAvgM(**NODE_ARGS, server_momentum=0.9),
    "FedProx": lambda: FedProx(**NODE_ARGS, proximal_mu=0.1),
    "FedAdam": lambda: FedAdam(**NODE_ARGS),
    "FedYogi": lambda: FedYogi(**NODE_ARGS),
    "FedAdagrad": lambda: FedAdagrad(**NODE_ARGS),
    "FedMedian": lambda: FedMedian(**NODE_ARGS),
    "FedTrimmedAvg": lambda: FedTrimmedAvg(**NODE_ARGS),
    "Krum": lambda: Krum(**NODE_ARGS),
}
RECORD: dict = {}

client = ClientApp(mods=[cepam_mod])


@client.train()
def train(msg: Message, ctx: Context) -> Message:
    """A PyTorch-like client: its float32 model takes the received values."""
    arrays = msg.content["arrays"]
    w, b, n = local_steps(arrays["w"].numpy().astype(np.float32),
                          arrays["b"].numpy().astype(np.float32),
                          int(ctx.node_config["partition-id"]),
                          int(msg.content["config"]["server-round"]))
    return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w), "b": Array(b)}),
                               "metrics": MetricRecord({"num-examples": n})}),
                   reply_to=msg)


server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    for name, make in STRATEGIES.items():
        seen = RECORD["runs"][name] = {"replies": [], "models": {}}

        def observe(messages, replies, seen=seen) -> None:
            if any("cepam" in m.content.config_records for m in messages):
                seen["replies"].append([None if r.has_error() else
                                        list(r.content.array_records) for r in replies])

        def keep(rnd: int, arrays: ArrayRecord, seen=seen) -> None:
            seen["models"][rnd] = {k: a.numpy() for k, a in arrays.items()}

        strategy = CepamStrategy(make(), mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP,
                                 authenticated_transport=True)
        result = strategy.start(
            grid=ObservedGrid(grid, observe), initial_arrays=ArrayRecord(
                {k: Array(v) for k, v in initial_model().items()}),
            num_rounds=ROUNDS, evaluate_fn=keep)
        seen["metrics"] = dict(result.train_metrics_clientapp)
    RECORD["done"] = True


@pytest.fixture(scope="module")
def simulation():
    RECORD.clear()
    RECORD["runs"] = {}
    simulate(server, client, NODES)
    assert RECORD.get("done"), "the ServerApp did not finish"
    return RECORD["runs"]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_trains_every_round_in_float32(simulation, name):
    run = simulation[name]
    assert sorted(run["metrics"]) == list(range(1, ROUNDS + 1))  # every round released
    for rnd, metrics in run["metrics"].items():
        assert metrics["cepam-updates"] == NODES, (name, rnd)
        assert metrics["cepam-dropped"] == 0, (name, rnd)
    assert len(run["replies"]) == ROUNDS
    for replies in run["replies"]:  # every reply a payload, none an error
        assert replies == [["cepam-payload"]] * NODES
    models = run["models"]
    assert sorted(models) == list(range(ROUNDS + 1))
    for rnd in range(1, ROUNDS + 1):
        for key, value in models[rnd].items():
            assert value.dtype == np.float32, (name, rnd, key)
            assert np.all(np.isfinite(value)), (name, rnd, key)
        assert not np.array_equal(models[rnd]["w"], models[rnd - 1]["w"]), (name, rnd)
