"""A node's own floor on Flower's simulation engine (Ray): one node sets
``cepam-min-sigma`` above the sigma the server asks for.

Three SuperNodes, two rounds, a 42-parameter model moved by a fixed step
(numpy only, so that the Ray workers start fast).  The floor node refuses
every train message before training, with an error reply and no payload;
the server counts it as dropped and averages the other two, whose training
moves the global model.  ``run_simulation`` gives every node the same node
config (its partition id only), so a mod in front of ``cepam_mod`` stands in
for ``--node-config cepam-min-sigma=...`` on node 0, as the secrets of
test_flower_simulation.py are given.
"""

from __future__ import annotations


import numpy as np
import pytest

flwr = pytest.importorskip("flwr")
pytest.importorskip("ray")
pytest.importorskip("cryptography")

# One Flower simulation on Ray (its start-up alone takes tens of seconds):
# the slow step of CI (python -m pytest -m slow).
pytestmark = pytest.mark.slow

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

import cepam  # noqa: E402
from cepam.accounting import FLSetting  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from helpers.grids import ObservedGrid, simulate  # noqa: E402
from cepam.flower.mod import ERROR_CODE, MIN_SIGMA_KEY  # noqa: E402

NODES, ROUNDS = 3, 2
SIGMA, CLIP = 0.05, 5.0  # no update is clipped (norms below 2)
SETTING = FLSetting(clip=CLIP, clients=NODES, samples_per_round=1, dataset_size=10)
RECORD: dict = {}


def floor_on_node_0(msg: Message, ctx: Context, call_next):
    """Stands in for --node-config cepam-min-sigma=0.1 on node 0."""
    if int(ctx.node_config["partition-id"]) == 0:
        ctx.node_config[MIN_SIGMA_KEY] = 2 * SIGMA
    return call_next(msg, ctx)


client = ClientApp(mods=[floor_on_node_0, cepam_mod])


@client.train()
def train(msg: Message, ctx: Context) -> Message:
    arrays = msg.content["arrays"]
    step = np.float32(0.1 * (1 + int(ctx.node_config["partition-id"])))
    content = RecordDict({"arrays": ArrayRecord({k: Array(a.numpy() + step)
                                                 for k, a in arrays.items()}),
                          "metrics": MetricRecord({"num-examples": 1})})
    return Message(content, reply_to=msg)


def record(messages, replies) -> None:
    """Keeps what every train reply carried."""
    for reply in replies:
        RECORD["replies"].append({
            "node": int(reply.metadata.src_node_id),
            "error": (reply.error.code, reply.error.reason) if reply.has_error() else None,
            "arrays": [] if reply.has_error() else list(reply.content.array_records)})


server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    strategy = CepamStrategy(
        FedAvg(fraction_evaluate=0.0, min_train_nodes=NODES, min_available_nodes=NODES),
        mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, setting=SETTING, pad=None)
    initial = {"w": np.zeros((20, 2), np.float32), "b": np.zeros(2, np.float32)}
    models = []
    result = strategy.start(
        grid=ObservedGrid(grid, record), initial_arrays=ArrayRecord(
            {k: Array(v) for k, v in initial.items()}), num_rounds=ROUNDS,
        evaluate_fn=lambda rnd, arrays: models.append(
            {k: a.numpy().copy() for k, a in arrays.items()}) or None)
    RECORD.update(result=result, models=models)


@pytest.fixture(scope="module")
def simulation():
    RECORD.clear()
    RECORD["replies"] = []
    simulate(server, client, NODES)
    assert "result" in RECORD, "the ServerApp did not finish"
    return RECORD


def test_a_node_with_a_floor_above_the_servers_sigma_sends_no_payload(simulation):
    replies = simulation["replies"]
    assert len(replies) == NODES * ROUNDS
    refused = [r for r in replies if r["error"] is not None]
    assert len(refused) == ROUNDS and len({r["node"] for r in refused}) == 1
    for r in refused:
        code, reason = r["error"]
        assert code == ERROR_CODE and r["arrays"] == []
        assert reason.startswith("cepam_mod: FloorRefusal: ")  # a fixed text, no values
        assert "0.1" not in reason and MIN_SIGMA_KEY in reason
    # The others sent their payloads; the server dropped the refusal and averaged them.
    assert all(r["arrays"] == ["cepam-payload"] for r in replies if r["error"] is None)
    metrics = simulation["result"].train_metrics_clientapp
    assert sorted(metrics) == list(range(1, ROUNDS + 1))
    for m in metrics.values():
        assert m["cepam-updates"] == NODES - 1 and m["cepam-dropped"] == 1
    first, last = simulation["models"][0], simulation["models"][-1]
    # Two rounds of the mean step of nodes 1 and 2, 0.25: 0.5, with noise of std
    # 0.05 / sqrt(2) per coordinate and round, about 0.008 on the mean over 40.
    assert np.mean(last["w"] - first["w"]) == pytest.approx(0.5, abs=0.1)
