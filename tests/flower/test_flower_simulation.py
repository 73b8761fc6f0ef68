"""cepam on Flower's simulation engine (Ray): one run, every promise checked.

Five SuperNodes train a 2,010-parameter softmax regression on synthetic data
(numpy only, so that the Ray workers start fast) through ``cepam_mod`` and
``CepamStrategy(FedAvg())`` with pre-shared secrets read from each node's
config; one node holds a wrong secret.  The run asks for 6 rounds under a
budget that allows 3.  Checked on the Messages the server received:

* every payload a client sends (all its Arrays, serialized) is at most 1/8
  of its float32 update;
* each round's global model is FedAvg (equal weights) of the decoded updates
  of the accepted clients, decoded here independently with their secrets;
* the eps in the round metrics is ``cepam.accounting``'s for the setting
  with K = 4 (the updates actually averaged);
* the node with the wrong secret is dropped every round, never averaged;
* the budget stop ends the run after round 3, normally.
"""

from __future__ import annotations

import dataclasses
import hashlib

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
from cepam.accounting import CepamGaussianRound, FLSetting, PLDAccountant  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from helpers.grids import ObservedGrid, simulate  # noqa: E402

NODES, ROUNDS, ALLOWED = 5, 6, 3
FEATURES, CLASSES = 200, 10
SIGMA, CLIP, DELTA = 0.5, 0.5, 1e-5
SETTING = FLSetting(clip=CLIP, clients=NODES, samples_per_round=4, dataset_size=64)
WRONG = "wrong"  # the partition whose node holds a wrong secret
RECORD: dict = {}


def node_secret(node_id: int) -> bytes:
    return hashlib.sha256(b"cepam-test-secret" + int(node_id).to_bytes(8, "little")).digest()


def initial_model() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"w": (0.01 * rng.standard_normal((FEATURES, CLASSES))).astype(np.float32),
            "b": np.zeros(CLASSES, np.float32)}


def local_data(partition: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + partition)
    x = rng.standard_normal((SETTING.dataset_size, FEATURES)).astype(np.float32)
    y = (x[:, :CLASSES].argmax(axis=1)).astype(np.int64)
    return x, y


# ---------------------------------------------------------------- ClientApp


def give_secret(msg: Message, ctx: Context, call_next):
    """Stands in for --node-config cepam-secret=...: node 0's secret is wrong."""
    secret = node_secret(ctx.node_id)
    if int(ctx.node_config["partition-id"]) == 0:
        secret = bytes(32)
    ctx.node_config["cepam-secret"] = secret.hex()
    return call_next(msg, ctx)


client = ClientApp(mods=[give_secret, cepam_mod])


@client.train()
def train(msg: Message, ctx: Context) -> Message:
    arrays = msg.content["arrays"]
    w, b, n = local_steps(arrays["w"].numpy().copy(), arrays["b"].numpy().copy(),
                          int(ctx.node_config["partition-id"]),
                          int(msg.content["config"]["server-round"]))
    content = RecordDict({"arrays": ArrayRecord({"w": Array(w), "b": Array(b)}),
                          "metrics": MetricRecord({"num-examples": n})})
    return Message(content, reply_to=msg)


def local_steps(w: np.ndarray, b: np.ndarray, partition: int, server_round: int
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """The partition's local training of (w, b), in place, in their dtypes:
    single-sample SGD steps; (w, b, the number of local examples)."""
    x, y = local_data(partition)
    rng = np.random.default_rng(server_round)
    for _ in range(SETTING.samples_per_round):  # single-sample SGD steps, with replacement
        i = rng.integers(len(y))
        logits = x[i] @ w + b
        p = np.exp(logits - logits.max())
        p /= p.sum()
        p[y[i]] -= 1.0
        w -= 0.5 * np.outer(x[i], p).astype(np.float32)
        b -= 0.5 * p.astype(np.float32)
    return w, b, len(y)


# ---------------------------------------------------------------- ServerApp


def wire_bytes(array: Array) -> int:
    """Bytes of an Array as Flower serializes it: its head and, where Flower
    splits the data into chunks (>= 1.42), every chunk."""
    chunks = array.slice_array() if hasattr(array, "slice_array") else []
    return len(array.deflate()) + sum(len(chunk.deflate()) for _, chunk in chunks)


def measure(messages, replies) -> None:
    """Keeps every train reply as received (before decoding)."""
    for msg in messages:
        if "cepam" in msg.content.config_records:
            cfg = msg.content["cepam"]
            RECORD["sent"].append((int(cfg["round"]), int(msg.metadata.dst_node_id)))
    for reply in replies:
        if reply.has_error() or "cepam" not in reply.content.config_records and \
                not any("cepam" in r for r in reply.content.array_records.values()):
            continue
        arrays = [a for r in reply.content.array_records.values() for a in r.values()]
        RECORD["replies"].append({
            "node": int(reply.metadata.src_node_id),
            "wire_bytes": sum(wire_bytes(a) for a in arrays),
            "payload": bytes(arrays[0].data),
        })

server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    strategy = CepamStrategy(
        FedAvg(fraction_evaluate=0.0, min_train_nodes=NODES, min_available_nodes=NODES),
        mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, setting=SETTING, delta=DELTA,
        max_epsilon=RECORD["max_epsilon"], secrets=node_secret, pad=None)
    models = []
    result = strategy.start(
        grid=ObservedGrid(grid, measure), initial_arrays=ArrayRecord(
            {k: Array(v) for k, v in initial_model().items()}),
        num_rounds=ROUNDS,
        evaluate_fn=lambda rnd, arrays: models.append(
            (rnd, {k: a.numpy().copy() for k, a in arrays.items()})) or None)
    RECORD.update(result=result, models=models, stopped=strategy.stopped_by_budget)


def _eps(rounds: int) -> float:
    event = CepamGaussianRound(sigma=SIGMA, setting=dataclasses.replace(SETTING,
                                                                        clients=NODES - 1))
    return PLDAccountant().compose(event, rounds).get_epsilon(DELTA)


@pytest.fixture(scope="module")
def simulation():
    RECORD.clear()
    RECORD.update(sent=[], replies=[],
                  max_epsilon=0.5 * (_eps(ALLOWED) + _eps(ALLOWED + 1)))
    simulate(server, client, NODES)
    assert "result" in RECORD, "the ServerApp did not finish"
    return RECORD


def test_budget_stop_ends_the_run_after_the_allowed_rounds(simulation):
    assert simulation["stopped"]
    assert sorted(simulation["result"].train_metrics_clientapp) == list(range(1, ALLOWED + 1))
    # Flower's own loop runs every round; those after the budget send nothing.
    assert [rnd for rnd, _ in simulation["models"]] == list(range(ROUNDS + 1))
    assert {rnd for rnd, _ in simulation["sent"]} == set(range(1, ALLOWED + 1))
    last = dict(simulation["models"])[ALLOWED]
    for rnd, model in simulation["models"][ALLOWED + 1:]:
        for name in last:
            np.testing.assert_array_equal(model[name], last[name])


def test_eps_in_metrics_is_the_accountants_for_the_updates_averaged(simulation):
    for rnd, metrics in simulation["result"].train_metrics_clientapp.items():
        assert metrics["cepam-updates"] == NODES - 1 and metrics["cepam-dropped"] == 1
        assert metrics["cepam-epsilon"] == pytest.approx(_eps(rnd), rel=1e-9)
        assert metrics["cepam-epsilon"] <= simulation["max_epsilon"]
        assert metrics["cepam-client-epsilon"] > 0  # the other promise, side by side


def test_each_client_sends_at_most_an_eighth_of_float32(simulation):
    m = FEATURES * CLASSES + CLASSES
    assert len(simulation["replies"]) == NODES * ALLOWED
    for reply in simulation["replies"]:
        assert reply["wire_bytes"] <= 4 * m / 8, reply["wire_bytes"]


def test_global_model_is_fedavg_of_the_decoded_updates_and_the_wrong_secret_is_dropped(
        simulation):
    models = dict(simulation["models"])
    wrong_nodes = set()
    for rnd in range(1, ALLOWED + 1):
        previous = models[rnd - 1]
        decoded = []
        for reply in simulation["replies"]:
            info = cepam.inspect(reply["payload"])
            if info.round != rnd:
                continue
            try:
                # The mod codes the arrays under their record/array names
                # (cepam.flower.protocol.flat_name), and a bare payload's
                # template must have the names it was encoded with.
                update = cepam.decode(reply["payload"], secret=node_secret(reply["node"]),
                                      like={f"arrays/{k}": previous[k] for k in ("w", "b")})
                update = {k.split("/", 1)[1]: v for k, v in update.items()}
            except cepam.AuthenticationError:
                wrong_nodes.add(reply["node"])
                continue
            decoded.append(update)
        assert len(decoded) == NODES - 1
        for name in ("w", "b"):
            expected = previous[name] + np.mean([u[name] for u in decoded], axis=0)
            # The inner FedAvg averages the noisy models (previous + update) in its own
            # arithmetic; allow a few float32 roundings of the largest value, far below the
            # noise (sigma / K ~ 0.1).
            ulp = np.finfo(np.float32).eps * max(1.0, float(np.abs(expected).max()))
            np.testing.assert_allclose(models[rnd][name], expected, rtol=0, atol=8 * ulp)
    assert len(wrong_nodes) == 1
