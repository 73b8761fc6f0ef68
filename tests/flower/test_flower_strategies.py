"""CepamStrategy around any Flower strategy, in process (no simulation).

The aggregate comes back in the dtypes sent; Flower's own log says what
cepam changes (equal weights, drops as failures, no "Sampled N nodes" for a
round that sends nothing); Flower's DP wrappers cannot wrap a CepamStrategy;
``buffers=`` travels to the client and is used there (FedBN with
``"local"``); aggregated running variances stay positive.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, \
    MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp.strategy import (  # noqa: E402
    DifferentialPrivacyClientSideAdaptiveClipping, DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping, DifferentialPrivacyServerSideFixedClipping,
    Bulyan, FedAdagrad, FedAdam, FedAvg, FedAvgM, FedMedian, FedProx, FedTrimmedAvg, FedYogi,
    Krum, MultiKrum, QFedAvg, FedXgbBagging, FedXgbCyclic,
)

import cepam  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from cepam.flower.mod import LOCAL_BUFFERS  # noqa: E402
from cepam.flower.protocol import RoundConfig  # noqa: E402
from cepam.flower.strategy import RUNNING_VAR_FLOOR  # noqa: E402
from test_flower_unit import (  # noqa: E402, F401 - task_identity: an autouse fixture
    MECH, NODES, FakeGrid, contexts, global_arrays, run_round, task_identity, train,
)

AUTH = dict(authenticated_transport=True)


def _rounds(st, rounds, arrays=None, ctxs=None, mods=(cepam_mod,)):
    """Runs ``rounds`` rounds in process; the aggregates and metrics."""
    ctxs = contexts() if ctxs is None else ctxs
    arrays = global_arrays() if arrays is None else arrays
    out = []
    for rnd in range(1, rounds + 1):
        _, replies = run_round(st, ctxs, rnd=rnd, arrays=arrays, mods=mods)
        assert not any(r.has_error() for r in replies), rnd
        arrays, metrics = st.aggregate_train(rnd, replies)
        out.append((arrays, metrics))
    return out


# ---------------------------------------------------------------- dtypes


def test_fedadam_s_float64_aggregate_comes_back_float32_every_round(caplog):
    caplog.set_level(logging.INFO)
    st = CepamStrategy(FedAdam(), mechanism=MECH, clip=1.0, **AUTH)
    sent = global_arrays()
    for arrays, metrics in _rounds(st, 3, arrays=sent):
        assert metrics["cepam-updates"] == len(NODES) and metrics["cepam-dropped"] == 0
        assert {k: a.numpy().dtype for k, a in arrays.items()} == \
            {k: a.numpy().dtype for k, a in sent.items()}
        assert all(np.all(np.isfinite(a.numpy())) for a in arrays.values())
    casts = [r.getMessage() for r in caplog.records if "cast back" in r.getMessage()]
    assert len(casts) == 1 and "FedAdam" in casts[0] and "float64 -> float32" in casts[0]


class Drifting(FedAvg):
    """An inner strategy that returns every array in another dtype."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        return ArrayRecord({k: Array(a.numpy().astype(self.dtype)) for k, a in arrays.items()}
                           ), metrics


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_any_dtype_drift_is_cast_back_in_one_place(dtype):
    sent = global_arrays()
    sent["w64"] = Array(np.linspace(-1, 1, 6, dtype=np.float64))
    (arrays, _), = _rounds(CepamStrategy(Drifting(dtype), mechanism=MECH, clip=1.0, **AUTH),
                           1, arrays=sent)
    assert {k: a.numpy().dtype for k, a in arrays.items()} == \
        {"w": np.float32, "b": np.float32, "steps": np.int64, "w64": np.float64}
    np.testing.assert_array_equal(arrays["steps"].numpy(), [5])  # the server's counter


# ---------------------------------------------------------------- Flower's log


def test_the_summary_says_every_reply_weighs_one(caplog):
    caplog.set_level(logging.INFO)
    CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0).summary()
    text = caplog.text
    assert "Weighted by: 'num-examples'" in text  # Flower's own line, then cepam's
    line = next(r.getMessage() for r in caplog.records if "weight 1" in r.getMessage())
    assert "not weighted by 'num-examples'" in line and "1/K" in line
    assert text.index("Weighted by") < text.index("weight 1")


def test_dropped_replies_are_flower_s_failures(caplog):
    caplog.set_level(logging.INFO)
    st = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **AUTH)
    _, replies = run_round(st, contexts())
    wrong = replies[1]
    payload = bytearray(wrong.content["cepam-payload"]["cepam"].data)
    payload[-1] ^= 1  # the tag no longer verifies
    wrong.content["cepam-payload"]["cepam"] = Array(
        dtype="uint8", shape=(len(payload),), stype=wrong.content["cepam-payload"]["cepam"].stype,
        data=bytes(payload))
    caplog.clear()
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3 and metrics["cepam-dropped"] == 1
    messages = [r.getMessage() for r in caplog.records]
    assert "aggregate_train: Received 3 results and 1 failures" in messages
    failure = next(m for m in messages if "Received error in reply" in m)
    assert f"node {wrong.metadata.src_node_id}:" in failure and "dropped by cepam" in failure


def _sampled_lines(caplog):
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("configure_train: Sampled")]


def test_a_round_that_sends_nothing_logs_no_sampled_line(caplog):
    from test_flower_unit import SETTING

    caplog.set_level(logging.INFO)
    st = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, setting=SETTING, max_epsilon=1e-3,
                       **AUTH)
    assert list(st.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid())) == []
    assert _sampled_lines(caplog) == []
    assert any("no train message is sent" in r.getMessage() for r in caplog.records)
    sent = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **AUTH)
    assert len(list(sent.configure_train(1, global_arrays(), ConfigRecord(), FakeGrid()))) == 4
    assert _sampled_lines(caplog) == ["configure_train: Sampled 4 nodes (out of 4)"]


def test_with_sampling_the_sampled_line_gives_the_cohort_sent(caplog):
    caplog.set_level(logging.INFO)
    st = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=1.0), clip=1.0,
                       sample_rate=0.5, sampling_seed=4, **AUTH)
    sizes = []
    for rnd in range(1, 9):  # the seed draws cohorts of several sizes, an empty one too
        caplog.clear()
        sizes.append(len(list(st.configure_train(rnd, global_arrays(), ConfigRecord(),
                                                 FakeGrid()))))
        lines = _sampled_lines(caplog)
        assert lines == ([f"configure_train: Sampled {sizes[-1]} nodes (out of 4)"]
                         if sizes[-1] else []), (rnd, lines)
    assert 0 in sizes and len(set(sizes)) > 2


# ---------------------------------------------------------------- Flower's DP wrappers


WRAPPERS = [
    lambda s: DifferentialPrivacyServerSideFixedClipping(s, 1.0, 1.0, 4),
    lambda s: DifferentialPrivacyClientSideFixedClipping(s, 1.0, 1.0, 4),
    lambda s: DifferentialPrivacyServerSideAdaptiveClipping(s, 1.0, 4, clipped_count_stddev=1.0),
    lambda s: DifferentialPrivacyClientSideAdaptiveClipping(s, 1.0, 4, clipped_count_stddev=1.0),
]


@pytest.mark.parametrize("wrap", WRAPPERS)
def test_a_flower_dp_wrapper_around_cepam_is_a_clear_error(wrap):
    inner = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **AUTH)
    grid = FakeGrid()
    with pytest.raises(cepam.InvalidArgumentError, match="wraps a CepamStrategy"):
        wrap(inner).start(grid=grid, initial_arrays=global_arrays(), num_rounds=1)
    assert grid.sent == []  # refused before anything is sent
    with pytest.raises(cepam.InvalidArgumentError, match="wraps a CepamStrategy"):
        wrap(inner).configure_train(1, global_arrays(), ConfigRecord(), grid)
    # and the other way round, as before
    with pytest.raises(cepam.InvalidArgumentError, match="Flower's own"):
        CepamStrategy(wrap(FedAvg()), mechanism=MECH, clip=1.0)


# ---------------------------------------------------------------- buffers (FedBN)


def bn_arrays(channels: int = 3) -> ArrayRecord:
    rng = np.random.default_rng(1)
    return ArrayRecord({"fc.weight": Array(rng.normal(size=(6, 3)).astype(np.float32)),
                        "bn.weight": Array(np.ones(3, np.float32)),
                        "bn.running_mean": Array(np.zeros(channels, np.float32)),
                        "bn.running_var": Array(np.ones(channels, np.float32)),
                        "bn.num_batches_tracked": Array(np.array([0], np.int64))})


def bn_train(msg: Message, ctx: Context) -> Message:
    """Moves the weights a little and the statistics towards the node's data
    (mean 10 x node's offset, variance 4), counting batches, as BatchNorm."""
    got = {k: a.numpy() for k, a in msg.content["arrays"].items()}
    ctx.state["seen"] = ArrayRecord({k: Array(v.copy()) for k, v in got.items()})
    own = float(ctx.node_id - 100)
    out = {"fc.weight": got["fc.weight"] + 0.01, "bn.weight": got["bn.weight"] - 0.01,
           "bn.running_mean": 0.5 * got["bn.running_mean"] + 5.0 * own,
           "bn.running_var": (0.5 * got["bn.running_var"] + 2.0).astype(np.float32),
           "bn.num_batches_tracked": got["bn.num_batches_tracked"] + 1}
    out = {k: np.asarray(v, dtype=got[k].dtype) for k, v in out.items()}
    return Message(RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in out.items()}),
                               "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)


def spy_on_encode(monkeypatch, argument: str) -> list:
    """The values of ``argument`` that each later cepam.encode call gets, in order."""
    seen = []
    encode = cepam.encode

    def spy(*args, **kwargs):
        seen.append(kwargs.get(argument))
        return encode(*args, **kwargs)

    monkeypatch.setattr(cepam, "encode", spy)
    return seen


@pytest.mark.parametrize("buffers", ["separate", "joint", "local"])
def test_buffers_travel_in_the_round_config_and_reach_encode(buffers, monkeypatch):
    seen = spy_on_encode(monkeypatch, "buffers")
    st = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, buffers=buffers, **AUTH)
    messages, replies = run_round(st, contexts(), arrays=bn_arrays(), mods=(cepam_mod,))
    assert all(m.content["cepam"]["buffers"] == buffers for m in messages)
    assert seen == [buffers] * len(NODES)
    coded = 6 * 3 + 3 + (0 if buffers == "local" else 3 + 3)
    for reply in replies:
        assert not reply.has_error()
        assert cepam.inspect(bytes(reply.content["cepam-payload"]["cepam"].data)
                             ).coordinates == coded


@pytest.mark.parametrize("prefer", ["balanced", "bits", "speed"])
def test_prefer_travels_in_the_round_config_and_its_padding_is_checked_with_it(prefer,
                                                                                monkeypatch):
    """lattice="auto"'s preference reaches every client's encode, and the
    server checks each payload's padded length under the same preference:
    "max" pads to the largest payload of the lattices the preference can
    choose, one lattice (Z) for "speed", so a server that checked under the
    default would drop every "speed" reply."""
    seen = spy_on_encode(monkeypatch, "prefer")
    st = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, prefer=prefer, pad="max", **AUTH)
    messages, replies = run_round(st, contexts(), arrays=bn_arrays(), mods=(cepam_mod,))
    assert all(m.content["cepam"]["prefer"] == prefer for m in messages)
    assert seen == [prefer] * len(NODES)
    assert not any(r.has_error() for r in replies)
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == len(NODES) and metrics["cepam-dropped"] == 0


@pytest.mark.parametrize("key, value, default", [("buffers", "local", "separate"),
                                                ("prefer", "bits", "balanced")])
def test_a_configuration_without_a_key_means_the_codec_s_default(key, value, default):
    """An older server's configuration lacks the key: the codec's default."""
    config = RoundConfig(mechanism=MECH, clip=1.0, lattice="auto", dim=None, coder="ans",
                         round=1, message=2, keys="pre-shared", **{key: value})
    record = config.to_record()
    assert RoundConfig.from_record(record) == config
    del record[key]
    assert getattr(RoundConfig.from_record(record), key) == default
    with pytest.raises(cepam.FormatError, match=key):
        RoundConfig.from_record({**record, key: "everywhere"})
    with pytest.raises(cepam.InvalidArgumentError, match=key):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, **{key: "everywhere"})


def test_a_preference_needs_lattice_auto():
    record = RoundConfig(mechanism=MECH, clip=1.0, lattice="auto", dim=None, coder="ans",
                         round=1, message=2, keys="pre-shared", prefer="speed").to_record()
    with pytest.raises(cepam.FormatError, match="needs lattice 'auto'"):
        RoundConfig.from_record({**record, "lattice": "E8"})
    with pytest.raises(cepam.InvalidArgumentError, match="needs lattice='auto'"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, lattice="E8", prefer="bits")


def _train_round(st, ctxs, rnd, arrays):
    messages = list(st.configure_train(rnd, arrays, ConfigRecord(), FakeGrid(list(ctxs))))
    replies = [cepam_mod(m, ctxs[m.metadata.dst_node_id], bn_train) for m in messages]
    assert not any(r.has_error() for r in replies)
    return st.aggregate_train(rnd, replies)


def test_local_buffers_stay_on_each_client_fedbn():
    st = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=1e-3), clip=1.0,
                       buffers="local", **AUTH)
    ctxs = contexts()
    start = bn_arrays()
    arrays, metrics = _train_round(st, ctxs, 1, start)
    assert metrics["cepam-updates"] == len(NODES)
    # The server aggregates the weights and keeps its own statistics.
    for name in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
        np.testing.assert_array_equal(arrays[name].numpy(), start[name].numpy())
    assert abs(float(np.mean(arrays["fc.weight"].numpy() - start["fc.weight"].numpy()))
               - 0.01) < 1e-3
    # Each node keeps its own statistics and trains from them next round.
    for node, ctx in ctxs.items():
        kept = ctx.state[LOCAL_BUFFERS]
        assert sorted(kept.keys()) == ["arrays/bn.running_mean", "arrays/bn.running_var"]
        np.testing.assert_allclose(kept["arrays/bn.running_mean"].numpy(), 5.0 * (node - 100))
    arrays2, _ = _train_round(st, ctxs, 2, arrays)
    for node, ctx in ctxs.items():
        seen = ctx.state["seen"]
        np.testing.assert_allclose(seen["bn.running_mean"].numpy(), 5.0 * (node - 100))
        np.testing.assert_allclose(seen["bn.running_var"].numpy(), 2.5)
        np.testing.assert_array_equal(seen["fc.weight"].numpy(), arrays["fc.weight"].numpy())
    np.testing.assert_array_equal(arrays2["bn.running_mean"].numpy(), np.zeros(3))
    # An evaluate message gets the node's own statistics too (FedBN evaluates with them).
    evaluate = Message(RecordDict({"arrays": arrays2, "config": ConfigRecord()}),
                       dst_node_id=NODES[0], message_type=MessageType.EVALUATE)
    shared = evaluate.content

    def look(msg, ctx):
        return msg.content["arrays"]["bn.running_mean"].numpy()

    # node 101 kept 0.5 * 5 + 5 after round 2 (5 after round 1)
    np.testing.assert_allclose(cepam_mod(evaluate, ctxs[NODES[0]], look), 7.5)
    assert shared["arrays"]["bn.running_mean"].numpy().tolist() == [0, 0, 0]  # not in place


def test_without_local_buffers_the_server_s_statistics_reach_the_clients():
    st = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=1e-3), clip=100.0, **AUTH)
    ctxs = contexts()
    arrays, _ = _train_round(st, ctxs, 1, bn_arrays())
    mean = arrays["bn.running_mean"].numpy()
    np.testing.assert_allclose(mean, 5.0 * np.mean([n - 100 for n in NODES]), atol=0.05)
    _train_round(st, ctxs, 2, arrays)
    for ctx in ctxs.values():
        assert LOCAL_BUFFERS not in ctx.state.array_records
        np.testing.assert_array_equal(ctx.state["seen"]["bn.running_mean"].numpy(), mean)


# ---------------------------------------------------------------- running_var floor


class Negative(FedAvg):
    """An inner strategy whose aggregate has negative running variances (as
    noise at sigma 4 gave: -2.47) and a negative running mean."""

    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        arrays["bn.running_var"] = Array(np.array([-2.47, 1e-9, 0.5], np.float32))
        arrays["bn.running_mean"] = Array(np.array([-2.47, 0.0, 0.5], np.float32))
        return arrays, metrics


@pytest.mark.parametrize("floor", [None, 0.25])
def test_aggregated_running_variances_stay_positive(floor, caplog):
    caplog.set_level(logging.INFO)
    args = {} if floor is None else {"running_var_floor": floor}
    st = CepamStrategy(Negative(), mechanism=MECH, clip=1.0, **args, **AUTH)
    arrays, _ = _train_round(st, contexts(), 1, bn_arrays())
    low = RUNNING_VAR_FLOOR if floor is None else floor
    np.testing.assert_array_equal(arrays["bn.running_var"].numpy(),
                                  np.array([low, low, max(low, 0.5)], np.float32))
    assert arrays["bn.running_var"].numpy().dtype == np.float32
    np.testing.assert_array_equal(arrays["bn.running_mean"].numpy(),
                                  np.array([-2.47, 0.0, 0.5], np.float32))
    assert any("running-variance value(s) below" in r.getMessage() for r in caplog.records)


def test_a_noised_running_variance_stays_positive(caplog):
    caplog.set_level(logging.INFO)
    st = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=4.0), clip=1.0, **AUTH)
    ctxs = contexts()
    arrays, _ = _train_round(st, ctxs, 1, bn_arrays(channels=256))
    # Each of the 256 variances is about 1 + N(0, 2^2) before the floor (the
    # clipped update is at most 1): below 0 with chance 0.31 each.
    var = arrays["bn.running_var"].numpy()
    assert var.dtype == np.float32 and float(var.min()) == pytest.approx(RUNNING_VAR_FLOOR)
    assert any("running-variance value(s) below" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf"), "1e-3", True])
def test_running_var_floor_is_checked(value):
    error = cepam.InvalidTypeError if isinstance(value, (str, bool)) else \
        cepam.InvalidArgumentError
    with pytest.raises(error, match="running_var_floor"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, running_var_floor=value)


# ---------------------------------------------------------------- strategies that do not average


class KeepsTheMean(FedAvg):
    """A FedAvg subclass of the user's own that keeps FedAvg's aggregate."""

    def configure_train(self, server_round, arrays, config, grid):
        return super().configure_train(server_round, arrays, config, grid)


class OwnAggregate(FedAvg):
    """A FedAvg subclass whose aggregate is its own: not known to average."""

    def aggregate_train(self, server_round, replies):
        return super().aggregate_train(server_round, replies)


@pytest.mark.parametrize("inner, averages", [
    (FedAvg(), True), (FedAvgM(), True), (FedProx(), True), (FedAdam(), True),
    (FedYogi(), True), (FedAdagrad(), True), (KeepsTheMean(), True),
    (FedMedian(), False), (FedTrimmedAvg(), False), (Krum(), False), (MultiKrum(), False),
    (Bulyan(), False), (OwnAggregate(), False),
])
def test_which_inner_strategies_average(inner, averages):
    from cepam.flower.inner import averages as averages_

    assert averages_(inner) is averages


def test_a_strategy_that_does_not_average_is_accounted_as_one_clients_update(caplog):
    """Krum releases one client's noisy model (noise sigma, not sigma /
    sqrt(K)): its rounds are accounted as the server's view, m = 1, in both
    epsilons; FedAvg's as the mean of K against a curious client."""
    from cepam.accounting import client_epsilon

    from test_flower_unit import SETTING

    caplog.set_level(logging.INFO)
    eps = {}
    for inner in (FedAvg(), Krum()):
        st = CepamStrategy(inner, mechanism=MECH, clip=1.0, setting=SETTING, **AUTH)
        (arrays, metrics), = _rounds(st, 1)
        assert arrays is not None
        eps[type(inner).__name__] = (metrics["cepam-epsilon"], metrics["cepam-client-epsilon"])
    assert st.threat_model == "server" and st.setting.threat_model == "server"
    assert any("Krum is not known to average" in r.getMessage() for r in caplog.records)
    krum, fedavg = eps["Krum"], eps["FedAvg"]
    assert krum[0] > fedavg[0] and krum[1] > fedavg[1]
    one = client_epsilon(sigma=MECH.sigma, clip=1.0, clients=len(NODES), rounds=1, delta=1e-5,
                         threat_model="server")
    assert krum[1] == pytest.approx(one, rel=1e-9)


def test_an_aggregate_set_on_the_instance_is_not_known_to_average_unless_declared():
    """An aggregate_train set on the instance (a median, say) was taken for
    FedAvg's own: only a method of the class is known; the operator may
    declare a strategy of their own that averages."""
    from cepam.flower.inner import averages

    inner = FedAvg()
    inner.aggregate_train = lambda server_round, replies: (None, None)
    assert not averages(inner)
    with pytest.raises(cepam.InvalidArgumentError, match="averages=True"):
        CepamStrategy(inner, mechanism=MECH, clip=1.0, relation="add-remove", population=4)
    st = CepamStrategy(OwnAggregate(), mechanism=MECH, clip=1.0, relation="add-remove",
                       population=4, averages=True)
    assert st.averages and st.threat_model == "client"
    st = CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, averages=False)
    assert not st.averages and st.threat_model == "server"
    with pytest.raises(cepam.InvalidTypeError, match="averages must be"):
        CepamStrategy(FedAvg(), mechanism=MECH, clip=1.0, averages=1)


@pytest.mark.parametrize("inner", [Krum(), FedMedian(), FedTrimmedAvg(), MultiKrum(),
                                   QFedAvg(client_learning_rate=0.1)])
def test_a_declaration_that_a_median_averages_is_refused(inner):
    """averages=True on Flower's own non-averaging strategy would report a
    mean's eps for one client's model or a median."""
    with pytest.raises(cepam.InvalidArgumentError, match="does not average"):
        CepamStrategy(inner, mechanism=MECH, clip=1.0, averages=True)


def test_a_declaration_that_a_median_s_subclass_averages_is_refused():
    """An override that logs and calls Krum's own aggregate is Krum's: the
    declaration would report a mean's eps for one client's model."""

    class LoggedKrum(Krum):
        def aggregate_train(self, server_round, replies):
            return super().aggregate_train(server_round, replies)

    with pytest.raises(cepam.InvalidArgumentError, match="does not average"):
        CepamStrategy(LoggedKrum(), mechanism=MECH, clip=1.0, averages=True,
                      relation="add-remove", population=4)


def test_a_strategy_without_a_bound_is_refused():
    with pytest.raises(cepam.InvalidArgumentError, match="QFedAvg weighs each update"):
        CepamStrategy(QFedAvg(client_learning_rate=0.1), mechanism=MECH, clip=1.0)
    for inner in (Krum(), FedMedian(), OwnAggregate()):
        with pytest.raises(cepam.InvalidArgumentError, match="not known to average"):
            CepamStrategy(inner, mechanism=MECH, clip=1.0, relation="add-remove", population=4)
    CepamStrategy(FedAvgM(), mechanism=MECH, clip=1.0, relation="add-remove", population=4)


@pytest.mark.parametrize("inner", [FedXgbBagging, FedXgbCyclic])
@pytest.mark.parametrize("averages", [None, True])
def test_xgboost_strategies_are_refused_at_construction(inner, averages):
    """Their model is serialised trees (bytes), which cepam cannot code: they
    are refused when the strategy is built, not at round 1."""
    with pytest.raises(cepam.InvalidArgumentError, match="serialised bytes"):
        CepamStrategy(inner(), mechanism=MECH, clip=1.0, averages=averages)


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize("inner", [FedAvg(), FedAdam()])
def test_zero_dimensional_arrays_keep_their_shape(inner, monkeypatch):
    """A 0-d parameter (a learned temperature) and a 0-d counter come back
    0-d (a (1,)-shaped temperature sent back made every later reply a
    changed shape, refused: FedAdam, whose aggregate is cast back)."""
    import test_flower_unit

    def train_0d(msg, ctx):  # (test_flower_unit.train, its arrays kept arrays when 0-d)
        step = 0.01 * (ctx.node_id - 100)
        new = {k: np.asarray(a.numpy() + step if a.numpy().dtype.kind == "f" else a.numpy())
               for k, a in msg.content["arrays"].items()}
        return Message(RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in new.items()}),
                                   "metrics": MetricRecord({"num-examples": 10})}),
                       reply_to=msg)

    monkeypatch.setattr(test_flower_unit, "train", train_0d)
    st = CepamStrategy(inner, mechanism=MECH, clip=1.0, **AUTH)
    arrays = global_arrays()
    arrays["temperature"] = Array(np.array(1.5, np.float32))
    arrays["tracked"] = Array(np.array(3, np.int64))
    for arrays, metrics in _rounds(st, 3, arrays=arrays):
        assert metrics["cepam-updates"] == len(NODES)
        assert arrays["temperature"].numpy().shape == ()
        assert arrays["tracked"].numpy().shape == () and int(arrays["tracked"].numpy()) == 3
