"""cepam_mod and CepamStrategy without the simulation engine: messages built by
hand, the mod called as Flower calls it, replies handed to aggregate_train.
Covers key agreement (the default), enforcement, hostile replies, refusals
and argument checks; tests/flower/test_flower_simulation.py runs the real engine."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from flwr.app import (  # noqa: E402
    Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord, RecordDict,
)
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

import cepam  # noqa: E402
from cepam.accounting import CepamGaussianRound, FLSetting, PLDAccountant  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from cepam.flower.keys import secret_from_node_config  # noqa: E402

NODES = [101, 102, 103, 104]
RUN = 7
SETTING = FLSetting(clip=1.0, clients=4, samples_per_round=5, dataset_size=100)
MECH = cepam.Gaussian(sigma=0.05)


@pytest.fixture(autouse=True)
def task_identity():
    """Flower >= 1.42 stamps messages with the process's task identity."""
    try:
        from flwr.supercore.task_identity import TaskIdentity
    except ImportError:  # Flower 1.41
        yield
        return
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = RUN, 1, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


class FakeGrid:
    class run:  # noqa: N801 - mirrors Grid.run
        run_id = RUN

    def __init__(self, nodes=None):
        self.sent, self.nodes = [], list(NODES if nodes is None else nodes)

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, *, timeout=None):
        self.sent.extend(messages)
        return []


def global_arrays() -> ArrayRecord:
    rng = np.random.default_rng(0)
    return ArrayRecord({"w": Array(rng.normal(size=(30, 4)).astype(np.float32)),
                        "b": Array(np.zeros(4, np.float32)),
                        "steps": Array(np.array([5], np.int64))})


def train(msg: Message, ctx: Context) -> Message:
    arrays = msg.content["arrays"]
    step = 0.01 * (ctx.node_id - 100)
    new = {k: a.numpy() + step if a.numpy().dtype.kind == "f" else a.numpy()
           for k, a in arrays.items()}
    return Message(RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in new.items()}),
                               "metrics": MetricRecord(
                                   {"num-examples": 10 ** (ctx.node_id - 100)})}),
                   reply_to=msg)


def contexts(**node_config):
    return {n: Context(run_id=RUN, node_id=n, node_config=dict(node_config), state=RecordDict(),
                       run_config={}) for n in NODES}


def strategy(**kwargs) -> CepamStrategy:
    args = dict(mechanism=MECH, clip=1.0, setting=SETTING)
    args.update(kwargs)
    return CepamStrategy(FedAvg(), **args)


def run_round(st, ctxs, rnd=1, mods=(cepam_mod,), arrays=None, grid=None):
    """One round on the nodes of ``ctxs`` (``grid``: a FakeGrid of them by
    default): the train messages and the replies."""
    arrays = global_arrays() if arrays is None else arrays
    grid = FakeGrid(list(ctxs)) if grid is None else grid
    messages = list(st.configure_train(rnd, arrays, ConfigRecord(), grid))
    replies = []
    for msg in messages:
        call = train
        for mod in reversed(mods):
            call = (lambda m, c, mod=mod, nxt=call: mod(m, c, nxt))
        replies.append(call(msg, ctxs[msg.metadata.dst_node_id]))
    return messages, replies


def test_key_agreement_round_trip_and_equal_weights():
    st = strategy()
    ctxs = contexts()
    arrays = global_arrays()
    messages, replies = run_round(st, ctxs, arrays=arrays)
    assert len({id(m.content) for m in messages}) == len(messages)  # a RecordDict per node
    nonces = {m.content["cepam"]["message"] for m in messages}
    assert len(nonces) == len(messages)
    for r in replies:
        assert not r.has_error()
        assert list(r.content.array_records) == ["cepam-payload"]
        (array,) = r.content["cepam-payload"].values()
        assert array.stype.startswith("cepam/v") and len(r.content["cepam"]["client-key"]) == 32
    agg, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 4 and metrics["cepam-dropped"] == 0
    eps = PLDAccountant().compose(CepamGaussianRound(sigma=MECH.sigma, setting=SETTING)
                                  ).get_epsilon(1e-5)
    assert metrics["cepam-epsilon"] == pytest.approx(eps, rel=1e-9)
    # Equal weights: the mean step is 0.025 (weighted by the num-examples the
    # clients claim, 10 to 10^4, it would be 0.039); the noise on the mean of
    # 4 updates over the 120 coordinates of w has std sigma / 2 / sqrt(120).
    delta = agg["w"].numpy() - arrays["w"].numpy()
    assert abs(float(delta.mean()) - 0.025) < 5 * MECH.sigma / 2 / np.sqrt(delta.size)
    np.testing.assert_array_equal(agg["steps"].numpy(), [5])
    assert agg["steps"].numpy().dtype == np.int64  # the server's counter, not FedAvg's float


def test_key_is_pinned_and_a_changed_key_is_dropped(caplog):
    st = strategy()
    ctxs = contexts()
    _, replies = run_round(st, ctxs)
    st.aggregate_train(1, replies)
    ctxs[101].state["cepam"]["private"] = bytes(range(32))  # node 101 changes key pair
    _, replies = run_round(st, ctxs, rnd=2)
    _, metrics = st.aggregate_train(2, replies)
    assert metrics["cepam-updates"] == 3 and metrics["cepam-dropped"] == 1
    assert "public key changed" in caplog.text


def test_tampered_server_key_means_a_wrong_secret_and_a_drop(caplog):
    def mitm(msg, ctx, call_next):
        if ctx.node_id == 102:
            msg.content["cepam"]["server-key"] = bytes.fromhex(
                "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        return call_next(msg, ctx)

    st = strategy()
    _, replies = run_round(st, contexts(), mods=(mitm, cepam_mod))
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3 and "tag does not verify" in caplog.text


def test_a_client_sending_less_noise_is_refused(caplog):
    def less_noise(msg, ctx, call_next):
        if ctx.node_id == 103:
            msg.content["cepam"]["scale"] = MECH.sigma / 10
        if ctx.node_id == 104:
            msg.content["cepam"]["clip"] = 10.0
        return call_next(msg, ctx)

    st = strategy()
    _, replies = run_round(st, contexts(), mods=(less_noise, cepam_mod))
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 2 and metrics["cepam-dropped"] == 2
    assert "mechanism" in caplog.text and "clip" in caplog.text


def test_replayed_payload_from_another_round_is_refused(caplog):
    st = strategy()
    ctxs = contexts()
    _, first = run_round(st, ctxs)
    old = first[0].content["cepam-payload"]
    st.aggregate_train(1, first)
    _, replies = run_round(st, ctxs, rnd=2)
    replies[0].content["cepam-payload"] = old  # round 1's payload again
    _, metrics = st.aggregate_train(2, replies)
    assert metrics["cepam-dropped"] == 1 and "round" in caplog.text


def _hostile(reply: Message, kind: str) -> Message:
    if kind == "error":
        return Message(Error(1, "boom"), reply_to=reply)
    record = reply.content["cepam-payload"]
    (array,) = record.values()
    data = bytes(array.data)
    if kind == "garbage":
        data = bytes(len(data))
    elif kind == "truncated":
        data = data[: len(data) // 2]
    elif kind == "flipped":
        data = data[:-20] + bytes([data[-20] ^ 1]) + data[-19:]
    if kind == "float32":
        del reply.content["cepam-payload"]
        reply.content["arrays"] = ArrayRecord({"w": Array(np.zeros((30, 4), np.float32))})
    elif kind == "stype":
        reply.content["cepam-payload"] = ArrayRecord(
            {"cepam": Array(dtype="uint8", shape=(len(data),), stype="other", data=data)})
    elif kind == "two-records":
        reply.content["more"] = ArrayRecord({"x": Array(np.zeros(1, np.float32))})
    elif kind == "no-metrics":  # accepted: a client may keep its metrics to itself
        del reply.content["metrics"]
    elif kind == "two-metrics":
        reply.content["more-metrics"] = MetricRecord({"x": 1.0})
    elif kind == "extra-metric":  # accepted, the key left out of the aggregate
        reply.content["metrics"]["surprise"] = 1.0
    else:
        reply.content["cepam-payload"] = ArrayRecord(
            {"cepam": Array(dtype="uint8", shape=(len(data),), stype=array.stype, data=data)})
    return reply


@pytest.mark.parametrize("kind", ["error", "garbage", "truncated", "flipped", "float32",
                                  "stype", "two-records", "two-metrics", "no-metrics",
                                  "extra-metric"])
def test_hostile_replies_are_dropped_never_raised(kind, caplog):
    st = strategy()
    _, replies = run_round(st, contexts())
    replies[2] = _hostile(replies[2], kind)
    agg, metrics = st.aggregate_train(1, replies)
    if kind in ("extra-metric", "no-metrics"):  # (the other replies' metrics left out)
        assert metrics["cepam-updates"] == 4 and "surprise" not in metrics
        return
    assert agg is not None and metrics["cepam-updates"] == 3 and "dropped" in caplog.text


def test_unknown_sender_and_too_few_updates():
    st = strategy()
    ctxs = contexts()
    _, replies = run_round(st, ctxs)
    agg, metrics = st.aggregate_train(1, replies[:1])  # K = 1 < 2 (curious-client view)
    assert agg is None and metrics is None and st.budget.rounds == []
    _, replies = run_round(st, ctxs, rnd=2)
    st._sent.pop(101)
    _, metrics = st.aggregate_train(2, replies)
    assert metrics["cepam-dropped"] == 1


def test_preshared_secrets_from_node_config():
    table = {n: bytes([n % 256]) * 32 for n in NODES}
    st = strategy(secrets=table)
    ctxs = {n: Context(run_id=RUN, node_id=n, node_config={"cepam-secret": table[n].hex()},
                       state=RecordDict(), run_config={}) for n in NODES}
    _, replies = run_round(st, ctxs)
    assert all("cepam" not in r.content.config_records for r in replies)
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 4
    # A node without the secret refuses to send anything.
    _, replies = run_round(strategy(secrets=table), contexts())
    assert all(r.has_error() and "cepam-secret" in r.error.reason for r in replies)
    with pytest.raises(cepam.InvalidArgumentError):
        secret_from_node_config({"cepam-secret": "abcd"})


@pytest.mark.parametrize("message_type", ["train.default", "train.finetune"])
def test_a_train_action_goes_through_the_mod_as_train_does(message_type):
    """Flower routes "train.<action>" to a train function (``@app.train()``
    gets "train.default"): its reply holds the trained model, so the mod
    encodes it, or refuses, exactly as for "train"."""
    ctx = contexts()[101]
    plain = Message(RecordDict({"arrays": global_arrays(), "config": ConfigRecord()}),
                    dst_node_id=101, message_type=message_type)
    reply = cepam_mod(plain, ctx, train)
    assert reply.has_error() and "no cepam configuration" in reply.error.reason

    def retype(msg, ctx, call_next):  # (the server's inner strategy named the action)
        return call_next(Message(msg.content, dst_node_id=msg.metadata.dst_node_id,
                                 message_type=message_type), ctx)

    _, replies = run_round(strategy(), contexts(**{"cepam-min-sigma": 1.0}),
                           mods=(retype, cepam_mod))
    assert all(r.has_error() and "FloorRefusal" in r.error.reason for r in replies)
    st = strategy()
    _, replies = run_round(st, contexts(), mods=(retype, cepam_mod))
    assert all(list(r.content.array_records) == ["cepam-payload"] for r in replies)
    assert st.aggregate_train(1, replies)[1]["cepam-updates"] == len(NODES)


def test_a_client_that_sends_no_metrics_is_accepted():
    """docs/privacy.md: a client that must not reveal its metrics sends
    none. Its reply is accepted; the inner strategy, which needs a
    MetricRecord a reply (for the weight), gets an empty one."""
    def silent(msg, ctx):
        reply = train(msg, ctx)
        del reply.content["metrics"]
        return reply

    st = strategy()
    messages = list(st.configure_train(1, global_arrays(), ConfigRecord(),
                                       FakeGrid(list(contexts()))))
    ctxs = contexts()
    replies = [cepam_mod(m, ctxs[m.metadata.dst_node_id], silent) for m in messages]
    assert not any(r.has_error() or r.content.metric_records for r in replies)
    arrays, metrics = st.aggregate_train(1, replies)
    assert arrays is not None and metrics["cepam-updates"] == len(NODES)
    assert metrics["cepam-dropped"] == 0


def test_mod_refusals():
    ctx = contexts()[101]
    arrays = global_arrays()
    plain = Message(RecordDict({"arrays": arrays, "config": ConfigRecord()}), dst_node_id=101,
                    message_type="train")
    reply = cepam_mod(plain, ctx, train)
    assert reply.has_error() and "no cepam configuration" in reply.error.reason
    st = strategy()
    (msg, *_), _ = run_round(st, contexts())
    msg.content["config"]["clipping_norm"] = 1.0
    reply = cepam_mod(msg, ctx, train)
    assert reply.has_error() and "central-DP" in reply.error.reason
    del msg.content["config"]["clipping_norm"]
    assert not cepam_mod(msg, ctx, train).has_error()
    resent = cepam_mod(msg, ctx, train)  # the same message again: same context
    assert resent.has_error() and "already used" in resent.error.reason
    evaluate = Message(RecordDict({"arrays": arrays}), dst_node_id=101, message_type="evaluate")
    assert cepam_mod(evaluate, ctx, lambda m, c: "passed") == "passed"


def test_laplace_budget_adds_up_and_stops():
    from cepam.accounting import tight_laplace_round

    laplace = cepam.Laplace(b=2.0)
    per_round = tight_laplace_round(scale=2.0, setting=SETTING, dimension=124).epsilon
    st = strategy(mechanism=laplace, max_epsilon=2.5 * per_round)
    ctxs = contexts()
    for rnd in (1, 2):
        _, replies = run_round(st, ctxs, rnd=rnd)
        _, metrics = st.aggregate_train(rnd, replies)
        assert metrics["cepam-epsilon"] == pytest.approx(rnd * per_round)
        assert "cepam-client-epsilon" not in metrics
    assert not st._check_budget(3, 4)


def test_drops_raise_eps_through_k():
    st = strategy()
    _, replies = run_round(st, contexts())
    _, metrics = st.aggregate_train(1, replies[:3])
    setting = dataclasses.replace(SETTING, clients=3)
    eps = PLDAccountant().compose(CepamGaussianRound(sigma=MECH.sigma, setting=setting)
                                  ).get_epsilon(1e-5)
    assert metrics["cepam-epsilon"] == pytest.approx(eps, rel=1e-9)


def test_arguments():
    with pytest.raises(cepam.InvalidArgumentError, match="Flower's own"):
        CepamStrategy(DifferentialPrivacyServerSideFixedClipping(
            FedAvg(), noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients=4),
            mechanism=MECH, clip=1.0)
    with pytest.raises(cepam.InvalidArgumentError, match="setting"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, max_epsilon=1.0)
    with pytest.raises(cepam.InvalidArgumentError, match="clip"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=2.0, setting=SETTING)
    with pytest.raises(cepam.InvalidTypeError):
        CepamStrategy(FedAvg(), mechanism=cepam.SDQ(step=0.1), clip=1.0)
    with pytest.raises(cepam.InvalidTypeError):
        CepamStrategy(object(), mechanism=MECH, clip=1.0)
    with pytest.raises(cepam.InvalidArgumentError):
        CepamStrategy(FedAvg(), mechanism=cepam.Laplace(b=1.0), clip=1.0, lattice="E8")
    with pytest.raises(cepam.InvalidTypeError):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, secrets=42)
    with pytest.raises(cepam.InvalidArgumentError):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, bound="loose")


@pytest.mark.parametrize("name", ["delta", "sample_rate", "clip_quantile", "clip_learning_rate",
                                  "clip_count_sigma", "running_var_floor"])
def test_a_setting_beyond_float64_is_refused_by_name(name):
    """An int beyond float64 raised OverflowError (check_real's float())."""
    extra = {"clip_count_sigma": 1.0} if name == "clip_quantile" else {}
    with pytest.raises(cepam.InvalidArgumentError,
                       match=f"^{name} must be a finite number, got an int beyond"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **{name: 2**1100, **extra})


@pytest.mark.parametrize("name", ["bound", "buffers"])
def test_an_array_for_a_named_choice_is_a_type_error(name):
    """An array raised numpy's "truth value of an array is ambiguous"
    ValueError (``bound not in (...)``, ``buffers in BUFFER_CHOICES``)."""
    with pytest.raises(cepam.InvalidTypeError, match=f"^{name} must be a str, one of"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **{name: np.array([1.0, 2.0])})


def test_a_legacy_flower_strategy_is_named_as_such():
    """flwr.server.strategy's FedAvg was "not a Flower Strategy", which it is."""
    legacy = pytest.importorskip("flwr.server.strategy")
    with pytest.raises(cepam.InvalidTypeError) as info:
        CepamStrategy(legacy.FedAvg(), mechanism=MECH, clip=1.0)
    assert str(info.value) == (
        "strategy must be a flwr.serverapp.strategy.Strategy (Flower's Message API), got "
        "flwr.server.strategy.fedavg.FedAvg: Flower's legacy strategies (flwr.server.strategy) "
        "are not supported; use flwr.serverapp.strategy.FedAvg")
    with pytest.raises(cepam.InvalidTypeError, match=r"got object$"):
        CepamStrategy(object(), mechanism=MECH, clip=1.0)


def test_import_cepam_does_not_import_flower():
    code = "import sys, cepam; cepam.encode; print('flwr' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_round_whose_drops_break_the_budget_is_not_released():
    def eps(ks):
        acct = PLDAccountant()
        for k in ks:
            acct.compose(CepamGaussianRound(sigma=1.0, setting=dataclasses.replace(
                SETTING, clients=k)))
        return acct.get_epsilon(1e-5)

    # Two rounds of 4 fit; a second round of 3 (one reply dropped) does not.
    budget = 0.5 * (eps([4, 4]) + eps([4, 3]))
    assert eps([4, 4]) < budget < eps([4, 3])
    st = strategy(mechanism=cepam.Gaussian(sigma=1.0), max_epsilon=budget)
    ctxs = contexts()
    _, replies = run_round(st, ctxs)
    assert st.aggregate_train(1, replies)[0] is not None
    assert st._check_budget(2, 4)
    _, replies = run_round(st, ctxs, rnd=2)
    replies[0] = Message(Error(1, "lost"), reply_to=replies[0])
    assert st.aggregate_train(2, replies) == (None, None)
    assert st.stopped_by_budget and st.budget.rounds == [4]


def _eps_of(ks, sigma=MECH.sigma):
    acct = PLDAccountant()
    for k in ks:
        acct.compose(CepamGaussianRound(sigma=sigma, setting=dataclasses.replace(SETTING,
                                                                                clients=k)))
    return acct.get_epsilon(1e-5)


def test_a_ledger_records_each_round_and_a_second_run_stops_at_the_budget(tmp_path):
    from cepam.accounting import Ledger

    path = tmp_path / "privacy.db"
    sigma = 1.0
    budget = 0.5 * (_eps_of([4, 4], sigma) + _eps_of([4, 4, 4], sigma))  # two rounds fit
    first = strategy(mechanism=cepam.Gaussian(sigma=sigma), max_epsilon=budget, ledger=path)
    ctxs = contexts()
    for rnd in (1, 2):
        _, replies = run_round(first, ctxs, rnd=rnd)
        _, metrics = first.aggregate_train(rnd, replies)
        assert metrics["cepam-epsilon"] == pytest.approx(_eps_of([4] * rnd, sigma), rel=1e-9)
    assert not first._check_budget(3, 4)  # a third round would not fit
    with Ledger(path) as ledger:  # on disk, as a restarted server finds it
        assert [e.round for e in ledger.events()] == [1, 2]
        assert ledger.epsilon() == pytest.approx(_eps_of([4, 4], sigma), rel=1e-9)
    # A new run (a restarted server, or a second training on the same data):
    # the ledger's spend counts, so it stops before its first round.
    second = strategy(mechanism=cepam.Gaussian(sigma=sigma), max_epsilon=budget, ledger=path)
    grid = FakeGrid()
    result = second.start(grid=grid, initial_arrays=global_arrays(), num_rounds=3)
    assert second.stopped_by_budget and not result.train_metrics_clientapp
    assert grid.sent == []  # not one train (or evaluate) message left the server
    with Ledger(path) as ledger:
        assert len(ledger.events()) == 2 and len(ledger.runs()) == 1


def test_the_client_level_eps_counts_every_run_the_ledger_holds(tmp_path):
    """Like the record-level eps: a restarted server's client-level eps went
    back to one run's (11.95 at every restart while the record-level eps
    grew, and from the tenth below it)."""
    from cepam.accounting import client_epsilon

    path = tmp_path / "privacy.db"
    for run in range(3):
        st = strategy(mechanism=cepam.Gaussian(sigma=1.0), ledger=path)
        _, replies = run_round(st, contexts())
        _, metrics = st.aggregate_train(1, replies)
        assert metrics["cepam-client-epsilon"] == pytest.approx(client_epsilon(
            sigma=1.0, clip=1.0, rounds=run + 1, clients=4, delta=1e-5,
            threat_model=SETTING.threat_model), rel=1e-9)
        st.ledger.close()


def test_a_ledger_needs_a_setting_and_the_strategy_s_delta(tmp_path):
    from cepam.accounting import Ledger

    with pytest.raises(cepam.InvalidArgumentError, match="setting"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, ledger=tmp_path / "x.db")
    with pytest.raises(cepam.InvalidTypeError, match="ledger"):
        strategy(ledger=42)
    Ledger(tmp_path / "d.db", delta=1e-6).close()
    st = strategy(ledger=tmp_path / "d.db")  # delta 1e-5: not the ledger's
    with pytest.raises(cepam.InvalidArgumentError, match="delta"):
        run_round(st, contexts())


def test_a_payload_from_another_run_is_refused(caplog):
    table = {n: bytes([n % 256]) * 32 for n in NODES}
    ctxs = {n: Context(run_id=RUN, node_id=n, node_config={"cepam-secret": table[n].hex()},
                       state=RecordDict(), run_config={}) for n in NODES}
    earlier = strategy(secrets=table)
    _, old = run_round(earlier, ctxs)
    st = strategy(secrets=table)  # the same nodes and secrets, a new run
    _, replies = run_round(st, ctxs)
    replies[1].content["cepam-payload"] = old[1].content["cepam-payload"]  # an earlier run's
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3 and metrics["cepam-dropped"] == 1


def test_an_encoding_failure_tells_the_server_nothing_about_the_update(caplog):
    def nan_train(msg, ctx):
        arrays = msg.content["arrays"]
        w = arrays["w"].numpy().copy()
        w[3, 2] = np.nan
        new = {"w": w, "b": arrays["b"].numpy(), "steps": arrays["steps"].numpy()}
        return Message(RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in new.items()}),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    st = strategy()
    ctxs = contexts()
    (msg, *_) = list(st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid()))
    reply = cepam_mod(msg, ctxs[msg.metadata.dst_node_id], nan_train)
    assert reply.has_error()
    assert "could not be encoded" in reply.error.reason
    assert "NaN" not in reply.error.reason and "14" not in reply.error.reason
    assert "NaN" in caplog.text  # the detail stays in the client's log


def test_the_aggregate_does_not_depend_on_the_order_replies_arrive_in():
    import copy
    st = strategy()
    _, replies = run_round(st, contexts())
    shuffled = copy.deepcopy(replies[::-1])
    first, _ = st.aggregate_train(1, copy.deepcopy(replies))
    second, _ = st.aggregate_train(1, shuffled)
    for name in first.keys():
        assert first[name].numpy().tobytes() == second[name].numpy().tobytes(), name


# ---------------------------------------------------------------- any model


class TwoRecords(FedAvg):
    """Sends a second ArrayRecord (float buffers and a counter) and keeps the
    decoded replies it is given."""

    seen: list = []

    def configure_train(self, server_round, arrays, config, grid):
        messages = list(super().configure_train(server_round, arrays, config, grid))
        for msg in messages:
            msg.content["buffers"] = ArrayRecord({
                "running_mean": Array(np.zeros(3, np.float32)),
                "num_batches_tracked": Array(np.array([7], np.int64))})
        return messages

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        self.seen = [{k: {n: a.numpy() for n, a in r.content[k].items()}
                      for k in r.content.array_records} for r in replies]
        for r in replies:
            del r.content["buffers"]
        return super().aggregate_train(server_round, replies)


def counting_train(msg: Message, ctx: Context) -> Message:
    """Moves every float array and counts up every integer array (BatchNorm)."""
    out = RecordDict({"metrics": MetricRecord({"num-examples": 1})})
    for key, record in msg.content.array_records.items():
        out[key] = ArrayRecord({
            n: Array(a.numpy() + 0.01 if a.numpy().dtype.kind == "f" else a.numpy() + 3)
            for n, a in record.items()})
    return Message(out, reply_to=msg)


def test_counters_change_freely_and_several_array_records_travel_in_one_payload():
    inner = TwoRecords()
    st = CepamStrategy(inner, mechanism=MECH, clip=1.0, setting=SETTING)
    ctxs = contexts()
    messages = list(st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid()))
    replies = [cepam_mod(m, ctxs[m.metadata.dst_node_id], counting_train) for m in messages]
    assert not any(r.has_error() for r in replies)
    for r in replies:  # one payload: the counters are not in it
        assert list(r.content.array_records) == ["cepam-payload"]
        info = cepam.inspect(bytes(r.content["cepam-payload"]["cepam"].data))
        assert info.coordinates == 30 * 4 + 4 + 3
    agg, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 4
    for content in inner.seen:  # decoded: both records, the server's own counters
        np.testing.assert_array_equal(content["arrays"]["steps"], [5])
        np.testing.assert_array_equal(content["buffers"]["num_batches_tracked"], [7])
        mean = content["buffers"]["running_mean"]
        assert abs(float(mean.mean()) - 0.01) < 5 * MECH.sigma
    np.testing.assert_array_equal(agg["steps"].numpy(), [5])


def test_a_duplicated_reply_is_counted_once(caplog):
    import copy

    st = strategy()
    _, replies = run_round(st, contexts())
    _, metrics = st.aggregate_train(1, replies + [copy.deepcopy(replies[1])])
    assert metrics["cepam-updates"] == 4 and metrics["cepam-dropped"] == 1
    assert metrics["cepam-epsilon"] == pytest.approx(_eps_of([4]), rel=1e-9)
    assert "second reply" in caplog.text
    # One node's reply twice does not pass a two-client minimum.
    st = strategy()
    _, replies = run_round(st, contexts())
    assert st.aggregate_train(1, [replies[0], copy.deepcopy(replies[0])]) == (None, None)


def test_message_metadata_is_kept():
    class Ttl(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            messages = list(super().configure_train(server_round, arrays, config, grid))
            for msg in messages:
                msg.metadata.ttl = 123.0
                msg.metadata.group_id = "g7"
            return messages

    st = CepamStrategy(Ttl(), mechanism=MECH, clip=1.0)
    for msg in st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid()):
        assert (msg.metadata.ttl, msg.metadata.group_id) == (123.0, "g7")
        assert "cepam" in msg.content.config_records


@pytest.mark.parametrize("kind", ["large", "structured", "records"])
def test_oversized_and_foreign_replies_are_dropped_before_parsing(kind, caplog, monkeypatch):
    st = strategy()
    _, replies = run_round(st, contexts())
    data = bytes(replies[1].content["cepam-payload"]["cepam"].data)
    stype = replies[1].content["cepam-payload"]["cepam"].stype
    if kind == "large":  # the limit: the float32 model (124 floats) + 64 KiB
        data = data + bytes(4 * 124 + 65536)
    elif kind == "structured":  # container byte: not bare
        data = data[:7] + bytes([3]) + data[8:]
    else:
        for i in range(3):
            replies[1].content[f"m{i}"] = MetricRecord({"x": 1.0})
    replies[1].content["cepam-payload"] = ArrayRecord(
        {"cepam": Array(dtype="uint8", shape=(len(data),), stype=stype, data=data)})
    real = cepam.inspect
    monkeypatch.setattr(cepam, "inspect", lambda p, **k: pytest.fail("parsed") if p == data
                        else real(p, **k))
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3 and metrics["cepam-dropped"] == 1
    assert {"large": "above the limit", "structured": "not a bare",
            "records": "records in the reply"}[kind] in caplog.text


def test_padding_max_gives_one_length_and_no_per_client_size_is_released():
    st = strategy(pad="max")
    messages, replies = run_round(st, contexts())
    assert {m.content["cepam"]["pad"] for m in messages} == {"max"}
    sizes = {len(r.content["cepam-payload"]["cepam"].data) for r in replies}
    assert len(sizes) == 1
    _, metrics = st.aggregate_train(1, replies)
    padded = sizes.pop()
    assert metrics["cepam-payload-bytes"] == padded
    st = strategy(pad=None)
    _, replies = run_round(st, contexts())
    assert all(len(r.content["cepam-payload"]["cepam"].data) < padded for r in replies)
    _, metrics = st.aggregate_train(1, replies)
    assert not [k for k in metrics.keys() if "bytes" in k or "bits" in k]
    with pytest.raises(cepam.InvalidArgumentError):
        strategy(pad="huge")


def test_the_default_padding_is_levels_below_max_and_releases_no_size():
    from cepam.padding import level_lengths

    _, replies = run_round(strategy(pad="max"), contexts())
    (top,) = {len(r.content["cepam-payload"]["cepam"].data) for r in replies}
    st = strategy()  # pad="levels", the default
    messages, replies = run_round(st, contexts())
    assert st.pad == "levels"
    assert {m.content["cepam"]["pad"] for m in messages} == {"levels"}
    sizes = {len(r.content["cepam-payload"]["cepam"].data) for r in replies}
    assert sizes <= set(level_lengths(top)) and max(sizes) < top
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == len(replies)
    assert not [k for k in metrics.keys() if "bytes" in k or "bits" in k]


@pytest.mark.parametrize("pad", ["levels", "max", "bucket", 4096])
def test_a_reply_whose_length_the_round_padding_does_not_give_is_dropped(pad, caplog):
    """The round configuration is not authenticated: a relay that changes
    the padding on its way to two nodes (here to 4,099 bytes, none of the
    rules' lengths: 4,096 and 4,871 are buckets, "max" and "levels" lie
    far below) is found by the server (cepam.padding.is_padded_as); their
    replies are dropped with the reason, the others kept.  (A relay that
    strips the padding makes the lengths the coded sizes, which fall on a
    rule's length by chance only: a test of it would be a test of luck.)"""
    def relay(msg, ctx, call_next):
        if ctx.node_id in (102, 104):
            msg.content["cepam"]["pad"] = "4099"
        return call_next(msg, ctx)

    st = strategy(pad=pad)
    _, replies = run_round(st, contexts(), mods=(relay, cepam_mod))
    sizes = {int(r.metadata.src_node_id): len(r.content["cepam-payload"]["cepam"].data)
             for r in replies}
    assert sizes[102] == sizes[104] == 4099 and max(sizes[101], sizes[103]) <= 4096
    with caplog.at_level(logging.WARNING, logger="flwr.cepam"):
        _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 2 and metrics["cepam-dropped"] == 2
    assert caplog.text.count(f"not a length that pad={pad!r} gives") == 2
    for node in (102, 104):
        assert f"reply of node {node}: payload of 4099 bytes" in caplog.text


def test_the_padding_travels_as_text():
    from cepam.flower.protocol import pad_from_text, pad_to_text

    for pad in (None, "bucket", "max", "levels", 4096):
        assert pad_from_text(pad_to_text(pad)) == pad
    for text in ("buckets", "Levels", "-5", "1.5"):
        with pytest.raises(cepam.FormatError, match="unknown padding"):
            pad_from_text(text)


def test_secret_files_must_be_private(tmp_path):
    from cepam.flower.keys import secrets_from_file

    secret = bytes(range(32))
    path = tmp_path / "secret"
    path.write_text(secret.hex() + "\n")
    path.chmod(0o644)
    with pytest.raises(cepam.InvalidArgumentError, match="chmod 600"):
        secret_from_node_config({"cepam-secret-file": str(path)})
    path.chmod(0o600)
    assert secret_from_node_config({"cepam-secret-file": str(path)}) == secret
    table = tmp_path / "secrets"
    table.write_text("# node secret\n101 " + secret.hex() + "\n")
    table.chmod(0o640)
    with pytest.raises(cepam.InvalidArgumentError, match="mode 0640"):
        secrets_from_file(table)
    table.chmod(0o600)
    assert secrets_from_file(table) == {101: secret}
    st = strategy(secrets=str(table))
    assert st._lookup(101) == secret


def test_used_contexts_persist_across_a_node_restart(tmp_path):
    table = {n: bytes([n % 256]) * 32 for n in NODES}
    config = {"cepam-secret": table[101].hex(), "cepam-state": str(tmp_path / "used.db")}
    st = strategy(secrets=table)
    (msg, *_) = [m for m in st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid())
                 if m.metadata.dst_node_id == 101]
    first = Context(run_id=RUN, node_id=101, node_config=config, state=RecordDict(),
                    run_config={})
    assert not cepam_mod(msg, first, train).has_error()
    restarted = Context(run_id=RUN, node_id=101, node_config=config, state=RecordDict(),
                        run_config={})  # a new process: its memory is empty
    again = cepam_mod(msg, restarted, train)
    assert again.has_error() and "already used" in again.error.reason


def _payload_of(reply: Message) -> bytes:
    return bytes(reply.content["cepam-payload"]["cepam"].data)


def test_a_restarted_node_without_a_state_file_sends_fresh_noise():
    """A node with a pre-shared secret and no ``cepam-state`` forgets the
    contexts it used when it restarts, and encodes the same train message
    again: a second release of its round (the state file is what refuses
    it), but never the same randomness (format version 8's payload nonce):
    other bytes, and noises independent of the first payload's."""
    table = {n: bytes([n % 256]) * 32 for n in NODES}
    config = {"cepam-secret": table[101].hex()}
    st = strategy(secrets=table)
    rng = np.random.default_rng(4)
    arrays = ArrayRecord({"w": Array(rng.normal(size=(100, 200)).astype(np.float32)),
                          "b": Array(np.zeros(4, np.float32))})
    (msg, *_) = [m for m in st.configure_train(1, arrays, ConfigRecord(), FakeGrid())
                 if m.metadata.dst_node_id == 101]

    def node():  # a fresh process: the mod's memory (the Context state) empty
        return Context(run_id=RUN, node_id=101, node_config=config, state=RecordDict(),
                       run_config={})

    first, again = cepam_mod(msg, node(), train), cepam_mod(msg, node(), train)
    assert not first.has_error() and not again.has_error()
    p1, p2 = _payload_of(first), _payload_of(again)
    assert p1 != p2 and cepam.inspect(p1).nonce != cepam.inspect(p2).nonce
    like = {"arrays/w": arrays["w"].numpy(), "arrays/b": arrays["b"].numpy()}  # (bare payloads)
    y1, y2 = (cepam.decode(p, secret=table[101], like=like)["arrays/w"].astype(np.float64)
              for p in (p1, p2))
    # The update: 0.01 on each of the 20,004 coordinates (train), clipped to 1.
    x = 0.01 * min(1.0, 1.0 / (0.01 * np.sqrt(20_004)))
    z1, z2 = (y1 - x).ravel(), (y2 - x).ravel()
    assert np.std(z1) == pytest.approx(MECH.sigma, rel=0.05)
    assert abs(np.corrcoef(z1, z2)[0, 1]) < 0.05  # 20,000 coordinates: std 0.007


def test_keys_pinned_in_a_file_across_runs(tmp_path, caplog):
    pins = tmp_path / "pins.json"
    ctxs = {n: Context(run_id=RUN, node_id=n, node_config={
        "cepam-key-file": str(tmp_path / f"node{n}.key")}, state=RecordDict(), run_config={})
        for n in NODES}
    _, replies = run_round(strategy(pinned_keys=pins), ctxs)
    first = strategy(pinned_keys=pins)
    _, replies = run_round(first, ctxs)
    assert first.aggregate_train(1, replies)[1]["cepam-updates"] == 4
    assert oct((tmp_path / "node101.key").stat().st_mode & 0o777) == "0o600"
    # A later run (a restarted server): the same keys pass, a new key for 101 does not.
    (tmp_path / "node101.key").unlink()
    second = strategy(pinned_keys=pins)
    _, replies = run_round(second, ctxs)
    _, metrics = second.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3 and "pinned" in caplog.text


def test_key_agreement_warns_unless_the_transport_is_authenticated(caplog):
    strategy()._begin_run(FakeGrid())
    assert "UNAUTHENTICATED" in caplog.text
    caplog.clear()
    strategy(authenticated_transport=True)._begin_run(FakeGrid())
    assert "UNAUTHENTICATED" not in caplog.text


def test_client_level_eps_uses_cepam_s_accountant_with_the_smallest_k(caplog):
    from cepam.accounting import client_epsilon

    caplog.set_level(logging.INFO, logger="flwr.cepam")
    st = strategy(mechanism=cepam.Gaussian(sigma=2.0))
    ctxs = contexts()
    _, replies = run_round(st, ctxs)
    st.aggregate_train(1, replies)
    _, replies = run_round(st, ctxs, rnd=2)
    _, metrics = st.aggregate_train(2, replies[:3])
    client = client_epsilon(sigma=2.0, clip=1.0, rounds=2, clients=3, delta=1e-5,
                            threat_model="client")
    assert metrics["cepam-client-epsilon"] == pytest.approx(client, rel=1e-12)
    # The log line gives the client level first and says what the record level
    # holds for; each names its relation and threat model.
    line = caplog.records[-1].getMessage()
    assert line.startswith(f"cepam: round 2: 3 updates averaged (0 dropped); client level "
                           f"(replace-one client, threat model client, any local training "
                           f"loop): eps {client:.4g} at delta 1e-05; record level "
                           f"(replace-one record, threat model client, tight bound): eps "
                           f"{metrics['cepam-epsilon']:.4g} at delta 1e-05, if the clients "
                           "train as the paper does (it holds only for the paper's loop: ")


def test_a_missing_client_level_accountant_is_said_not_silent(monkeypatch, caplog):
    import cepam.flower.budget

    def no_scipy():
        raise ImportError("No module named 'scipy'")

    monkeypatch.setattr(cepam.flower.budget, "_client_epsilon", no_scipy)
    st = strategy()
    _, replies = run_round(st, contexts())
    _, metrics = st.aggregate_train(1, replies)
    assert "cepam-client-epsilon" not in metrics and "cepam-epsilon" in metrics
    assert "no client-level eps" in caplog.text


def test_record_and_array_names_that_would_collide_are_refused():
    class Colliding(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            messages = list(super().configure_train(server_round, arrays, config, grid))
            for msg in messages:
                msg.content["arrays/w"] = ArrayRecord({"x": Array(np.zeros(2, np.float32))})
                msg.content["arrays"]["w/x"] = Array(np.zeros(2, np.float32))
            return messages

    st = CepamStrategy(Colliding(), mechanism=MECH, clip=1.0)
    with pytest.raises(cepam.InvalidArgumentError, match="same record/array name"):
        st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid())


# ------------------------------------------------------------- the node's own floor


def test_a_node_with_a_pre_shared_secret_refuses_key_agreement(caplog):
    """A relay that switches the round to key agreement with a key of its own
    would decode the update: the node refuses, before training."""
    reply, trained, metrics = _floor_round({"cepam-secret": "ab" * 32})  # (agreement: default)
    assert reply.has_error() and not trained and not reply.has_content()
    assert reply.error.reason.startswith("cepam_mod: KeysMismatch: the server asks for key "
                                         "agreement")
    assert any("holds a pre-shared secret" in r.getMessage() for r in caplog.records
               if r.levelno == logging.ERROR)
    assert metrics["cepam-dropped"] == 1


def _floor_round(node_config, **strategy_args):
    """One round with ``node_config`` on node 101 only: its reply, whether it
    trained, and the strategy's metrics."""
    trained = []

    def recorder(msg, ctx, call_next):
        trained.append(ctx.node_id)
        return call_next(msg, ctx)

    ctxs = contexts()
    ctxs[101].node_config.update(node_config)
    st = strategy(**strategy_args)
    messages, replies = run_round(st, ctxs, mods=(cepam_mod, recorder))
    reply = next(r for m, r in zip(messages, replies) if m.metadata.dst_node_id == 101)
    _, metrics = st.aggregate_train(1, replies)
    return reply, 101 in trained, metrics


@pytest.mark.parametrize("node_config, strategy_args, named", [
    ({"cepam-min-sigma": 0.1}, {}, "gaussian sigma = 0.05, below this node's floor "
                                   "cepam-min-sigma = 0.1"),
    ({"cepam-max-clip": 0.5}, {}, "clip = 1, above this node's cepam-max-clip = 0.5"),
    # The noise multiplier sigma / clip (the floor that fits adaptive clipping).
    ({"cepam-min-noise-multiplier": 0.1},
     {"clip": 0.8, "mechanism": cepam.Gaussian(sigma=0.06), "setting": None},
     "gaussian sigma / clip = 0.075 (0.06 / 0.8), below this node's floor "
     "cepam-min-noise-multiplier = 0.1"),
    ({"cepam-min-noise-multiplier": 0.01, "cepam-min-sigma": 0.1}, {},
     "gaussian sigma = 0.05, below this node's floor cepam-min-sigma = 0.1"),
    ({"cepam-min-noise-multiplier": 0.01}, {"mechanism": cepam.Laplace(b=2.0)},
     "laplace mechanism, for which this node sets no floor (cepam-min-laplace-b)"),
    ({"cepam-min-laplace-b": 1.0}, {},
     "gaussian mechanism, for which this node sets no floor (cepam-min-sigma or "
     "cepam-min-noise-multiplier)"),
    ({"cepam-min-sigma": 0.01, "cepam-max-clip": 0.5}, {}, "cepam-max-clip = 0.5"),
    ({"cepam-min-laplace-b": 3}, {"mechanism": cepam.Laplace(b=2.0)},
     "laplace b = 2, below this node's floor cepam-min-laplace-b = 3"),
    # A floor on Gaussian noise alone does not let the server switch to Laplace.
    ({"cepam-min-sigma": 0.01}, {"mechanism": cepam.Laplace(b=2.0)},
     "laplace mechanism, for which this node sets no floor (cepam-min-laplace-b)"),
    # Nor ask for the clipped-or-not bit (which a relay could ask for at a
    # count-sigma of 1e-12: the bit in clear), nor ask for it below its floor.
    ({"cepam-min-sigma": 0.01}, {"clip_count_sigma": 1.0},
     "clipped-or-not bit (count-sigma = 1), for which this node sets no floor"),
    ({"cepam-min-sigma": 0.01, "cepam-min-count-sigma": 2.0}, {"clip_count_sigma": 1.0},
     "count-sigma = 1, below this node's floor cepam-min-count-sigma = 2"),
    # A padding that hides less of the length than the node's floor (the
    # configuration is unauthenticated: a relay could strip the padding).
    ({"cepam-min-pad": "levels"}, {"pad": None},
     "pad = None, which hides less of the payload's length than this node's floor "
     "cepam-min-pad = 'levels'"),
    ({"cepam-min-pad": "max"}, {"pad": "levels"}, "pad = 'levels', which hides less"),
    ({"cepam-min-pad": "bucket", "cepam-min-sigma": 0.01}, {"pad": None}, "pad = None"),
])
def test_a_node_refuses_a_server_asking_for_less_than_its_floor(node_config, strategy_args,
                                                                named, caplog):
    reply, trained, metrics = _floor_round(node_config, **strategy_args)
    assert reply.has_error() and reply.error.code == cepam.flower.mod.ERROR_CODE
    assert not trained  # refused before training
    # The server is told a fixed text, not the node's floor or its own values.
    assert reply.error.reason == ("cepam_mod: FloorRefusal: the server asks for less privacy "
                                  "than this node's floor (cepam-min-sigma, "
                                  "cepam-min-noise-multiplier, cepam-min-laplace-b, "
                                  "cepam-max-clip, "
                                  "cepam-min-count-sigma, cepam-min-pad): not encoded")
    assert not reply.has_content()  # no payload leaves
    errors = [r for r in caplog.records if r.levelno == logging.ERROR
              and "alone binds no privacy" not in r.getMessage()]  # (a lone floor's, once)
    assert len(errors) == 1 and named in errors[0].getMessage()  # in the node's log
    assert metrics["cepam-updates"] == 3 and metrics["cepam-dropped"] == 1


@pytest.mark.parametrize("node_config, strategy_args", [
    ({"cepam-min-sigma": 0.05, "cepam-max-clip": 1}, {}),  # at the floor
    ({"cepam-min-noise-multiplier": 0.05}, {}),  # at the floor: 0.05 / 1
    ({"cepam-min-noise-multiplier": 0.1}, {"clip": 0.25, "setting": None}),  # 0.2
    ({"cepam-min-sigma": 0.01, "cepam-min-laplace-b": 1e-3}, {}),
    ({"cepam-min-laplace-b": 2.0, "cepam-min-sigma": 1.0},
     {"mechanism": cepam.Laplace(b=2.0)}),
    ({"cepam-max-clip": 2.5}, {"mechanism": cepam.Laplace(b=2.0)}),  # no noise floor set
    ({"cepam-min-pad": "levels"}, {}),  # the strategy's default, "levels"
    ({"cepam-min-pad": "levels"}, {"pad": "max"}),
    ({"cepam-min-pad": "max"}, {"pad": 1 << 20}),  # a size: one length, as "max"
    ({"cepam-min-pad": "bucket", "cepam-min-sigma": 0.05}, {"pad": "bucket"}),
])
def test_a_node_encodes_what_its_floor_allows(node_config, strategy_args):
    reply, trained, metrics = _floor_round(node_config, **strategy_args)
    assert not reply.has_error() and trained
    assert metrics["cepam-updates"] == 4 and metrics["cepam-dropped"] == 0


@pytest.mark.parametrize("value", ["none", "None", "", 3, True, None])
def test_a_bad_pad_floor_is_a_clear_error_at_first_use(value, caplog):
    key = cepam.flower.mod.MIN_PAD_KEY
    with pytest.raises(cepam.InvalidArgumentError, match=f"node config {key} must be one of "
                                                         "'bucket', 'max', 'levels'"):
        cepam.flower.mod.node_pad_floor({key: value})
    reply, trained, _ = _floor_round({key: value})
    assert reply.has_error() and reply.error.reason.startswith("cepam_mod: BadFloor: ")
    assert not trained and repr(value) not in reply.error.reason
    assert any(r.levelno == logging.ERROR and key in r.getMessage() for r in caplog.records)
    assert cepam.flower.mod.node_pad_floor({"partition-id": 3}) is None
    assert cepam.flower.mod.node_pad_floor({key: "max"}) == "max"


@pytest.mark.parametrize("clip", [0.0, -1.0, float("nan")])
@pytest.mark.parametrize("floor", [{"cepam-max-clip": 1.0}, {"cepam-min-noise-multiplier": 0.1},
                                   {"cepam-min-sigma": 0.01}])
def test_a_floor_refuses_a_round_whose_clip_is_not_positive(clip, floor):
    """A configuration's clip is not checked when it is read (the codec
    refuses it later): no floor can be held to one that is not positive,
    so a node with any floor refuses the round before training (a clip of
    0 divided by zero)."""
    from cepam.flower.mod import _check_floor, _FloorRefusal
    from cepam.flower.protocol import KEYS_AGREED, RoundConfig

    record = RoundConfig(MECH, 1.0, "Z", None, "ans", 1, 0, KEYS_AGREED,
                         server_key=bytes(32)).to_record()
    config = RoundConfig.from_record({**record, "clip": clip})
    ctx = Context(run_id=RUN, node_id=101, node_config=dict(floor), state=RecordDict(),
                  run_config={})
    with pytest.raises(_FloorRefusal, match="which no floor can be held to"):
        _check_floor(config, ctx)


@pytest.mark.parametrize("key", ["cepam-min-noise-multipler", "cepam-min-sigma ",
                                 "Cepam-Max-Clip", "cepam-secret-fiel"])
def test_a_misspelt_cepam_key_is_refused_not_ignored(key, caplog):
    """A floor under a misspelt key would bind nothing: the node refuses
    every round until its config is fixed, naming the key."""
    reply, trained, _ = _floor_round({key: 5.0})
    assert reply.has_error() and reply.error.reason.startswith("cepam_mod: UnknownKey: ")
    assert "does not read" in reply.error.reason and not trained
    assert any(r.levelno == logging.ERROR and repr(key) in r.getMessage()
               for r in caplog.records)
    assert cepam.flower.mod.unknown_node_keys({key: 1, "partition-id": 0,
                                               "cepam-min-sigma": 1}) == [key]


@pytest.mark.parametrize("floor, lone", [
    ({"cepam-min-sigma": 0.01}, "cepam-min-sigma"),
    ({"cepam-max-clip": 2.0}, "cepam-max-clip"),
    ({"cepam-min-sigma": 0.01, "cepam-max-clip": 2.0}, None),
    ({"cepam-min-sigma": 0.01, "cepam-min-noise-multiplier": 0.01}, None),
    ({"cepam-min-noise-multiplier": 0.01}, None)])
def test_a_floor_that_binds_no_privacy_alone_is_logged_once(floor, lone, caplog, monkeypatch):
    """The privacy is sigma / clip: a floor on sigma without one on the clip
    (or the reverse) does not bound it, which the node's log says once; the
    round itself is encoded (the floor it sets is met)."""
    monkeypatch.setattr(cepam.flower.mod, "_LONE_FLOORS_LOGGED", set())
    for _ in range(2):
        reply, trained, _ = _floor_round(floor)
        assert not reply.has_error() and trained
    logged = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR and "alone binds no privacy" in r.getMessage()]
    assert len(logged) == (0 if lone is None else 1)
    assert lone is None or f"this node's {lone} " in logged[0]


@pytest.mark.parametrize("pad,floor,hides", [
    (None, "bucket", False), ("bucket", "bucket", True), ("bucket", "levels", False),
    ("levels", "bucket", True), ("max", "levels", True), (100, "max", True),
    ("levels", "max", False), (None, None, True), (7, 5, True)])
def test_padding_rules_are_ordered_by_what_they_hide(pad, floor, hides):
    assert cepam.padding.hides_at_least(pad, floor) is hides


@pytest.mark.parametrize("key", cepam.flower.mod.FLOOR_KEYS)
@pytest.mark.parametrize("value", ["0.5", 0, -1.0, float("nan"), float("inf"), True, None])
def test_a_bad_floor_value_is_a_clear_error_at_first_use(key, value, caplog):
    with pytest.raises(cepam.InvalidArgumentError, match=f"node config {key} must be a "
                                                         "positive finite number"):
        cepam.flower.mod.node_floor({key: value})
    reply, trained, _ = _floor_round({key: value})
    assert reply.has_error() and reply.error.reason.startswith("cepam_mod: BadFloor: ")
    assert "nothing is encoded until it is fixed" in reply.error.reason and not trained
    assert repr(value) not in reply.error.reason
    assert any(r.levelno == logging.ERROR and key in r.getMessage() for r in caplog.records)
    assert cepam.flower.mod.node_floor({"partition-id": 3, key: 2}) == {key: 2.0}
