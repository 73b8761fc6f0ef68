"""CepamStrategy's client sampling, add-remove aggregation and adaptive
clipping, without the simulation engine (messages built by hand, the mod
called as Flower calls it, replies handed to aggregate_train);
tests/flower/test_flower_sampling_simulation.py runs Poisson sampling on the
real engine."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")
scipy_stats = pytest.importorskip("scipy.stats")

from flwr.app import Array, ArrayRecord, Context, RecordDict  # noqa: E402
from flwr.serverapp.strategy import FedAvg, FedAvgM  # noqa: E402

import cepam  # noqa: E402
from cepam.accounting import ClientLevelRound, PLDAccountant  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from cepam.flower.protocol import flat_name  # noqa: E402
from test_flower_unit import (  # noqa: E402,F401 (task_identity: an autouse fixture)
    RUN, FakeGrid, global_arrays, run_round, task_identity,
)

SIGMA, CLIP, DELTA = 0.05, 1.0, 1e-5
P_MIN = 1e-6  # a statistical check fails below this p-value


def node_contexts(nodes, table=None):
    """One Context per node; with ``table``, each holds its pre-shared secret."""
    return {n: Context(run_id=RUN, node_id=n, state=RecordDict(), run_config={},
                       node_config={} if table is None else {"cepam-secret": table[n].hex()})
            for n in nodes}


def sampled(**kwargs) -> CepamStrategy:
    """CepamStrategy(FedAvg) with ``kwargs``; under add-remove the
    population declared is the tests' 10 nodes unless ``kwargs`` says."""
    args = dict(mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, delta=DELTA)
    if kwargs.get("relation") == "add-remove":
        args["population"] = 10
    args.update(kwargs)
    return CepamStrategy(FedAvg(min_available_nodes=1, min_train_nodes=1), **args)


def composed(events) -> float:
    acct = PLDAccountant()
    for event in events:
        acct.compose(event)
    return acct.get_epsilon(DELTA)


def two_sided(p_lower: float) -> float:
    return 2.0 * min(p_lower, 1.0 - p_lower)


# ---------------------------------------------------------------- sampling


def add_remove_round(**kwargs) -> ClientLevelRound:
    """The round of Poisson sampling at rate 0.8 from 10 nodes, add-remove,
    sigma = 2 clip (an empty cohort releases the top-up noise alone)."""
    args = dict(sigma=2.0, clip=CLIP, clients=8, threat_model="client", sample_rate=0.8,
                relation="add-remove", sampling="poisson")
    args.update(kwargs)
    return ClientLevelRound(**args)


def test_poisson_cohorts_vary_are_reproducible_and_every_round_is_accounted():
    nodes = list(range(101, 111))
    ctxs = node_contexts(nodes)
    runs = []
    for _ in range(2):  # the same seed draws the same cohorts
        st = sampled(sample_rate=0.8, relation="add-remove", sampling_seed=7,
                     mechanism=cepam.Gaussian(sigma=2.0))
        sizes, events = [], []
        for rnd in range(1, 7):
            messages, replies = run_round(st, ctxs, rnd=rnd)
            assert sorted(int(m.metadata.dst_node_id) for m in messages) == st.last_cohort
            sizes.append(len(messages))
            agg, metrics = st.aggregate_train(rnd, replies)
            events.append(add_remove_round())
            # every round is accounted, an empty cohort's too; k is not released
            assert 0 < metrics["cepam-client-epsilon"] < np.inf
            assert metrics["cepam-client-epsilon"] == pytest.approx(composed(events), rel=1e-9)
            assert "cepam-updates" not in metrics and "cepam-dropped" not in metrics
            assert agg is not None  # an empty cohort releases the top-up noise alone
        runs.append(sizes)
    assert runs[0] == runs[1] and len(set(runs[0])) > 1


def test_a_fixed_cohort_draws_clients_nodes_uniformly():
    nodes = list(range(101, 109))
    st = sampled(sampling="fixed", clients=3, sampling_seed=1)
    ctxs = node_contexts(nodes)
    seen = set()
    for rnd in range(1, 5):
        messages, replies = run_round(st, ctxs, rnd=rnd)
        assert len(messages) == 3
        seen.update(st.last_cohort)
        _, metrics = st.aggregate_train(rnd, replies)
        assert metrics["cepam-updates"] == 3  # replace-one: k is released
    assert len(seen) > 3  # not the same three every round
    event = ClientLevelRound(sigma=SIGMA, clip=CLIP, clients=3, threat_model="client",
                             sample_rate=3 / 8, relation="replace-one", sampling="fixed")
    assert metrics["cepam-client-epsilon"] == pytest.approx(composed([event] * 4), rel=1e-9)


def test_sampling_needs_an_inner_strategy_that_addresses_every_node():
    with pytest.raises(cepam.InvalidArgumentError, match="fraction_train=1.0"):
        CepamStrategy(FedAvg(fraction_train=0.5), mechanism=cepam.Gaussian(sigma=SIGMA),
                      clip=CLIP, sample_rate=0.1)
    CepamStrategy(FedAvg(fraction_train=0.5), mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP)


@pytest.mark.parametrize("kwargs, error", [
    (dict(sample_rate=0.0), cepam.InvalidArgumentError),
    (dict(sample_rate=1.5), cepam.InvalidArgumentError),
    (dict(sample_rate="0.1"), cepam.InvalidTypeError),
    (dict(relation="add-one"), cepam.InvalidArgumentError),
    (dict(sampling="fixed"), cepam.InvalidArgumentError),  # no clients
    (dict(sampling="fixed", clients=3, relation="add-remove"), cepam.InvalidArgumentError),
    (dict(sampling="fixed", clients=3, sample_rate=0.5), cepam.InvalidArgumentError),
    (dict(clients=3), cepam.InvalidArgumentError),  # clients without sampling="fixed"
    (dict(relation="add-remove", threat_model="server"), cepam.InvalidArgumentError),
    (dict(threat_model="curious"), cepam.InvalidArgumentError),
    (dict(sample_rate=0.5, mechanism=cepam.Laplace(b=1.0)), cepam.InvalidArgumentError),
    (dict(clip_quantile=0.5), cepam.InvalidArgumentError),  # no clip_count_sigma
    (dict(clip_quantile=1.0, clip_count_sigma=1.0), cepam.InvalidArgumentError),
    (dict(clip_count_sigma=0.0), cepam.InvalidArgumentError),
    (dict(clip_quantile=0.5, clip_count_sigma=1.0, clip_learning_rate=-1.0),
     cepam.InvalidArgumentError),
    (dict(sampling_seed=-1), cepam.InvalidArgumentError),
    # Checked at construction too (they were accepted, and some failed later
    # with raw errors: lattice=None inside Flower at the first round).
    (dict(clip_learning_rate=-1.0), cepam.InvalidArgumentError),  # even without clip_quantile
    (dict(clip_learning_rate="x"), cepam.InvalidTypeError),
    (dict(lattice=None), cepam.InvalidTypeError),
    (dict(max_epsilon=True, sample_rate=0.5), cepam.InvalidTypeError),
    (dict(delta="1e-5"), cepam.InvalidTypeError),
    (dict(pinned_keys=5), cepam.InvalidTypeError),
    (dict(ledger_name=""), cepam.InvalidArgumentError),
    (dict(ledger_name=5), cepam.InvalidArgumentError),
])
def test_sampling_and_clipping_arguments(kwargs, error):
    with pytest.raises(error):
        sampled(**kwargs)


def test_numpy_scalars_are_numbers():
    st = sampled(max_epsilon=np.float32(2.0), delta=np.float64(1e-6),
                 sample_rate=np.float32(0.5))
    assert (st.max_epsilon, st.delta, st.sample_rate) == (2.0, 1e-6, 0.5)


def test_a_ledger_records_the_client_level_rounds(tmp_path):
    from cepam.accounting import Ledger

    path = tmp_path / "privacy.db"
    st = sampled(sample_rate=0.8, relation="add-remove", sampling_seed=3, ledger=path,
                 mechanism=cepam.Gaussian(sigma=2.0))
    ctxs = node_contexts(range(101, 111))
    for rnd in (1, 2):
        _, replies = run_round(st, ctxs, rnd=rnd)
        _, metrics = st.aggregate_train(rnd, replies)
    with Ledger(path) as ledger:
        assert [e.round for e in ledger.events()] == [1, 2]
        assert {type(e.event) for e in ledger.events()} == {ClientLevelRound}
        assert ledger.epsilon() == pytest.approx(metrics["cepam-client-epsilon"], rel=1e-9)
        assert ledger.epsilon() == pytest.approx(composed([add_remove_round()] * 2), rel=1e-9)


# ---------------------------------------------------------------- add-remove


def test_the_cohort_tail_sets_the_accounted_round_and_the_top_up_cap():
    """CepamStrategy(cohort_tail=) reaches the round's event and the server
    tops the noise up to that event's T (n = 10 of a population of 100 at q
    = 0.1: T = 56 at 1e-30 against 36 at the default); add/remove only."""
    from cepam.accounting import cohort_cap

    caps, topped = [], []
    for tail in (None, 1e-30):
        st = sampled(sample_rate=0.1, relation="add-remove", population=100, sampling_seed=1,
                     cohort_tail=tail)
        topup_std = st._topup_std

        def spy(sigma, *, k, cap, topup_std=topup_std):
            topped.append(cap)
            return topup_std(sigma, k=k, cap=cap)

        st._topup_std = spy
        _, replies = run_round(st, node_contexts(range(101, 111)))
        st.aggregate_train(1, replies)
        event = st.budget.events[0]
        assert event.cohort_tail == (1e-12 if tail is None else tail)
        caps.append(event.cap)
    assert caps == topped == [36, 56] == [cohort_cap(clients=10, sample_rate=0.1),
                                          cohort_cap(clients=10, sample_rate=0.1, tail=1e-30)]
    with pytest.raises(cepam.InvalidArgumentError, match="'add-remove' only"):
        sampled(sample_rate=0.5, cohort_tail=1e-30)
    with pytest.raises(cepam.InvalidArgumentError, match="cohort_tail must"):
        sampled(sample_rate=0.5, relation="add-remove", cohort_tail=0.5)


def test_add_remove_takes_n_and_t_from_the_declared_population_not_the_nodes_connected(
        caplog):
    """Under add/remove one client's presence must not move the fixed
    denominator n = q N or the cap T (the released noise's scale would show
    it): they come from the population declared, whether 9, 10 or 11 (the
    accounting's larger neighbour) nodes are connected; 12 is more than
    that, and no round is run."""
    with pytest.raises(cepam.InvalidArgumentError, match="needs population=N"):
        CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP,
                      sample_rate=0.5, relation="add-remove")
    for bad, error in ((0, cepam.InvalidArgumentError), (10 ** 13, cepam.InvalidArgumentError),
                       (True, cepam.InvalidTypeError), (2.5, cepam.InvalidTypeError)):
        with pytest.raises(error, match="population must be"):
            sampled(sample_rate=0.5, relation="add-remove", population=bad)
    assert sampled(sample_rate=0.5, relation="add-remove",
                   population=np.int64(10)).population == 10
    # Under replace-one the noise is the cohort's drawn from the nodes
    # addressed: a larger N declared would under-report eps (42 for 922).
    for kwargs in (dict(sampling="fixed", clients=3), dict(sample_rate=0.5)):
        with pytest.raises(cepam.InvalidArgumentError, match="for relation 'add-remove'"):
            sampled(population=20, **kwargs)
    plans = []
    for connected in (9, 10, 11):
        st = sampled(sample_rate=0.5, relation="add-remove", population=10, sampling_seed=1)
        run_round(st, node_contexts(range(101, 101 + connected)))
        plans.append((st._plan.clients, st._plan.event))
        assert "of a population of 10" in st._sampling_text()
    assert plans[0] == plans[1] == plans[2] and plans[0][0] == 5.0
    st = sampled(sample_rate=0.5, relation="add-remove", population=10, sampling_seed=1)
    messages, _ = run_round(st, node_contexts(range(101, 113)))
    assert messages == [] and st._plan is None
    assert "more than the population of 10 declared (population=) and the one" in caplog.text




def big_arrays() -> ArrayRecord:
    rng = np.random.default_rng(5)
    return ArrayRecord({"w": Array(rng.normal(size=(50, 40)).astype(np.float32)),
                        "b": Array(np.zeros(4, np.float32))})


@pytest.mark.parametrize("relation, sample_rate, deliver", [
    ("add-remove", 1.0, 2), ("add-remove", 0.5, None), ("replace-one", 0.8, 5)])
def test_the_sum_is_topped_up_and_divided_by_the_relation_s_denominator(relation, sample_rate,
                                                                        deliver):
    """released - global = (sum_i d_i + t) / D with t ~ N(0, (C - k) sigma^2)
    per coordinate, k the replies accepted: add-remove D = n = q N (fixed)
    and C = T (cohort_cap); replace-one D = k and C = the cohort drawn (the
    replies lost are made up for).  The residual D (released - global) -
    sum_i d_i, from the payloads decoded here with the nodes' secrets, has
    mean 0 (z-test) and variance (C - k) sigma^2 (chi-square) over the
    2,004 coordinates of three rounds; under add-remove, the same residual
    with D = k (the mean of the replies) fails the z-test in every round
    where k differs from n."""
    from cepam.accounting import cohort_cap

    nodes = list(range(101, 111)) if sample_rate < 1 else list(range(101, 105))
    table = {n: bytes([n % 256]) * 32 for n in nodes}
    st = sampled(sample_rate=sample_rate, relation=relation, sampling_seed=11,
                 secrets=table, pad=None,
                 **({"population": len(nodes)} if relation == "add-remove" else {}))
    ctxs = node_contexts(nodes, table)
    n = sample_rate * len(nodes)
    z, chi2, dof, p_by_k = 0.0, 0.0, 0, []
    for rnd in range(1, 4):
        arrays = big_arrays()
        messages, replies = run_round(st, ctxs, rnd=rnd, arrays=arrays)
        replies = replies[:deliver]  # with deliver: the others are lost
        k = len(replies)
        if k == 0:
            continue
        add_remove = relation == "add-remove"
        cap = cohort_cap(clients=n, sample_rate=sample_rate) if add_remove else len(messages)
        denominator = n if add_remove else k
        template = {flat_name("arrays", name): a.numpy() for name, a in arrays.items()}
        total = {name: np.zeros(a.shape) for name, a in template.items()}
        for reply in replies:
            payload = bytes(reply.content["cepam-payload"]["cepam"].data)
            decoded = cepam.decode(payload, secret=table[int(reply.metadata.src_node_id)],
                                   like=template, output="numpy")
            for name in total:
                total[name] += decoded[name]
        agg, _ = st.aggregate_train(rnd, replies)
        moved = np.concatenate([(agg[name].numpy().astype(np.float64)
                                 - arrays[name].numpy()).ravel() for name in ("w", "b")])
        total = np.concatenate([total[flat_name("arrays", name)].ravel() for name in ("w", "b")])
        resid = denominator * moved - total
        assert k <= cap
        if cap == k:
            np.testing.assert_allclose(resid, 0.0, atol=1e-4)
            continue
        sd = np.sqrt(cap - k) * SIGMA
        z += resid.sum() / sd
        chi2 += float(np.sum((resid / sd) ** 2))
        dof += resid.size
        if k != denominator:  # the mean of the replies would be biased by (k/n - 1) sum_i d_i
            z_by_k = (k * moved - total).sum() / (sd * k / denominator) / np.sqrt(resid.size)
            p_by_k.append(two_sided(scipy_stats.norm.cdf(z_by_k)))
    assert dof > 0
    p_mean = two_sided(scipy_stats.norm.cdf(z / np.sqrt(dof)))
    p_var = two_sided(scipy_stats.chi2.cdf(chi2, dof))
    assert p_mean > P_MIN and p_var > P_MIN, (p_mean, p_var)
    if relation == "add-remove":
        assert p_by_k and max(p_by_k) < P_MIN, p_by_k


def test_an_empty_add_remove_cohort_releases_the_top_up_noise_alone():
    """Under add-remove an empty cohort must not show: the model moves by
    N(0, T sigma^2) / n per coordinate, T = cohort_cap, n = q N (chi-square
    over the coordinates); integer arrays stay as they were."""
    from cepam.accounting import cohort_cap

    nodes = list(range(101, 111))
    st = sampled(sample_rate=0.1, relation="add-remove", sampling_seed=3)
    ctxs = node_contexts(nodes)
    sd = SIGMA * np.sqrt(cohort_cap(clients=1.0, sample_rate=0.1)) / 1.0
    empty = 0
    for rnd in range(1, 12):
        arrays = big_arrays()
        arrays["steps"] = Array(np.array([7], np.int64))
        messages, replies = run_round(st, ctxs, rnd=rnd, arrays=arrays)
        agg, metrics = st.aggregate_train(rnd, replies)
        if messages:
            continue
        empty += 1
        assert agg["steps"].numpy().tolist() == [7]
        moved = np.concatenate([(agg[name].numpy().astype(np.float64)
                                 - arrays[name].numpy()).ravel() for name in ("w", "b")])
        assert agg["w"].numpy().dtype == np.float32
        chi2 = float(np.sum((moved / sd) ** 2))
        assert two_sided(scipy_stats.chi2.cdf(chi2, moved.size)) > P_MIN
        assert 0 < metrics["cepam-client-epsilon"] < np.inf
    assert empty > 0


def test_an_empty_add_remove_round_goes_through_the_inner_strategy():
    """A strategy with state (FedAvgM's momentum) gets the empty round's
    noisy model as any round's, so its state moves as in any round and the
    empty cohort does not show in later models either."""
    inner = FedAvgM(server_momentum=0.9, min_available_nodes=1, min_train_nodes=1)
    seen = []
    aggregate = inner.aggregate_train

    def spy(server_round, replies):
        replies = list(replies)
        seen.append(server_round)
        return aggregate(server_round, replies)

    inner.aggregate_train = spy  # (an instance attribute: not known to average, so declared)
    st = CepamStrategy(inner, mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, delta=DELTA,
                       sample_rate=0.1, relation="add-remove", population=10,
                       sampling_seed=3,
                       averages=True)  # (the spy, set on the instance, calls FedAvgM's)
    ctxs = node_contexts(list(range(101, 111)))
    arrays, empty = big_arrays(), 0
    for rnd in range(1, 12):
        momentum = None if inner.momentum_vector is None else \
            [m.copy() for m in inner.momentum_vector]
        messages, replies = run_round(st, ctxs, rnd=rnd, arrays=arrays)
        agg, _ = st.aggregate_train(rnd, replies)
        assert agg is not None and seen[-1] == rnd
        if not messages:
            empty += 1
            assert inner.momentum_vector is not None  # (set by the first round: this one)
            assert momentum is None or not all(
                np.array_equal(a, b) for a, b in zip(momentum, inner.momentum_vector))
        arrays = agg
    assert empty > 0


def test_under_add_remove_an_empty_round_looks_like_any_other(monkeypatch):
    """Clients that report a train_loss, and an inner strategy whose metrics
    aggregation reads it (it fails on the empty round's one noisy model):
    every round still releases a model, and the released metrics have the
    same keys in every round (the clients' own metrics are not released
    under add-remove)."""
    import test_flower_unit
    from flwr.app import Message, MetricRecord, RecordDict

    plain = test_flower_unit.train

    def train_with_loss(msg, ctx):
        reply = plain(msg, ctx)
        content = RecordDict({"arrays": reply.content["arrays"],
                              "metrics": MetricRecord({"num-examples": 10,
                                                       "train_loss": 0.5})})
        return Message(content, reply_to=msg)

    def losses(contents, key):
        return MetricRecord({"train_loss": float(np.mean(
            [c["metrics"]["train_loss"] for c in contents]))})

    monkeypatch.setattr(test_flower_unit, "train", train_with_loss)
    inner = FedAvg(min_available_nodes=1, min_train_nodes=1, train_metrics_aggr_fn=losses)
    st = CepamStrategy(inner, mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, delta=DELTA,
                       sample_rate=0.1, relation="add-remove", population=10,
                       sampling_seed=3)
    ctxs = node_contexts(list(range(101, 111)))
    keys, empty, full = set(), 0, 0
    for rnd in range(1, 12):
        messages, replies = run_round(st, ctxs, rnd=rnd, arrays=big_arrays())
        agg, metrics = st.aggregate_train(rnd, replies)
        assert agg is not None, rnd
        keys.add(tuple(sorted(metrics.keys())))
        empty += not messages
        full += bool(messages)
    assert empty > 0 and full > 0
    assert keys == {("cepam-client-epsilon",)}


def test_a_round_the_accountant_cannot_bound_sends_nothing(caplog):
    """Against a curious client a round needs two clients: with one node
    addressed the round sends nothing (logged) and the run goes on."""
    import logging

    caplog.set_level(logging.WARNING)
    st = sampled(clip_count_sigma=1.0)
    messages, _ = run_round(st, node_contexts([101]), rnd=1)
    assert messages == []
    assert any("no train message is sent this round" in r.getMessage() for r in caplog.records)
    messages, replies = run_round(st, node_contexts([101, 102, 103]), rnd=2)
    assert len(messages) == 3
    agg, metrics = st.aggregate_train(2, replies)
    assert agg is not None and metrics["cepam-client-epsilon"] > 0


# ---------------------------------------------------------------- clipping


def seeded_bits(monkeypatch, seed: int) -> None:
    """The nodes' clipped-or-not bits noised from one seeded Generator, not
    from each node's OS entropy (cepam_mod's own), so that a test of the
    clip's path is deterministic."""
    from cepam.flower import mod

    rng, real = np.random.default_rng(seed), mod.noisy_bit

    def noisy_bit(norm, **kwargs):
        return real(norm, **{**kwargs, "rng": rng})

    monkeypatch.setattr(mod, "noisy_bit", noisy_bit)


def test_the_clip_moves_toward_the_target_quantile(monkeypatch):
    """Nodes 101-104 move each of the model's 124 float coordinates by 0.01 i
    (i = 1..4): update norms 0.111, 0.223, 0.334 and 0.445.  From a clip of
    1.0 the median-targeting clip comes down between the 2nd and 3rd norms
    and stays there; each round's configuration carries the clip and the
    noise that keeps sigma / clip; the published clipped fraction is the
    true one up to the bits' noise.  The bits' noise is seeded: the clip
    settles near 0.325, 3 % below the 3rd norm, where the noise's random walk
    would carry it past that norm in a late round in about one run in 700."""
    seeded_bits(monkeypatch, 0)
    norms = [0.01 * i * np.sqrt(124) for i in range(1, 5)]
    count_sigma = 0.01
    st = sampled(clip_quantile=0.5, clip_learning_rate=0.5, clip_count_sigma=count_sigma)
    ctxs = node_contexts(range(101, 105))
    clips = []
    for rnd in range(1, 16):
        messages, replies = run_round(st, ctxs, rnd=rnd)
        config = messages[0].content["cepam"]
        clip = config["clip"]
        assert config["scale"] == pytest.approx(SIGMA / CLIP * clip, rel=1e-12)
        assert config["count-sigma"] == count_sigma
        clips.append(clip)
        _, metrics = st.aggregate_train(rnd, replies)
        assert metrics["cepam-updates"] == 4 and metrics["cepam-clip"] == clip
        true = float(np.mean([norm > clip for norm in norms]))
        # 1 - bbar has noise sd count_sigma / 2 (four bits): within 6 sd
        assert abs(metrics["cepam-clipped-fraction"] - true) < 6 * count_sigma / 2
        assert "cepam-unclipped" not in metrics  # the bits go no further
    assert clips[0] == CLIP and all(b < a for a, b in zip(clips[:4], clips[1:5]))
    assert all(norms[1] < c < norms[2] for c in clips[-5:])
    event = ClientLevelRound(sigma=SIGMA, clip=CLIP, clients=4, threat_model="client",
                             sample_rate=1.0, relation="replace-one", sampling="poisson",
                             count_sigma=count_sigma)
    assert metrics["cepam-client-epsilon"] == pytest.approx(composed([event] * 15), rel=1e-9)


@pytest.mark.parametrize("floor, refused_from", [
    ({"cepam-min-noise-multiplier": SIGMA / CLIP}, None),  # the multiplier stays: never
    ({"cepam-min-sigma": SIGMA}, 2),  # the first round whose clip came down
])
def test_a_noise_multiplier_floor_holds_under_adaptive_clipping(monkeypatch, floor,
                                                                refused_from):
    """Adaptive clipping lowers the clip, and sigma with it at the same noise
    multiplier: a node whose floor is on sigma / clip encodes every round,
    one whose floor is on sigma itself refuses once the clip has come down."""
    seeded_bits(monkeypatch, 0)
    count_sigma = 0.01
    st = sampled(clip_quantile=0.5, clip_learning_rate=0.5, clip_count_sigma=count_sigma)
    ctxs = node_contexts(range(101, 105))
    ctxs[101].node_config.update(floor, **{"cepam-min-count-sigma": count_sigma})
    updates = []
    for rnd in range(1, 7):
        _, replies = run_round(st, ctxs, rnd=rnd)
        _, metrics = st.aggregate_train(rnd, replies)
        updates.append(metrics["cepam-updates"])
    assert st._round_settings()[0] < CLIP / 2  # the clip came down
    expected = [4 if refused_from is None or rnd < refused_from else 3 for rnd in range(1, 7)]
    assert updates == expected


def test_a_fixed_clip_publishes_the_noised_clipped_fraction():
    st = sampled(clip=0.3, clip_count_sigma=0.01, mechanism=cepam.Gaussian(sigma=0.015))
    messages, replies = run_round(st, node_contexts(range(101, 105)))
    _, metrics = st.aggregate_train(1, replies)
    # the norms 0.334 and 0.445 are above the clip; the four bits' noise has sd 0.005
    assert abs(metrics["cepam-clipped-fraction"] - 0.5) < 0.03
    assert metrics["cepam-clipped-fraction"] != 0.5  # noised
    assert st._round_settings()[0] == 0.3


def test_a_payload_under_another_clip_or_without_its_bit_is_refused(caplog):
    def old_clip(msg, ctx, call_next):
        if ctx.node_id == 101:  # encodes under the first round's clip and sigma
            msg.content["cepam"]["clip"] = CLIP
            msg.content["cepam"]["scale"] = SIGMA
        return call_next(msg, ctx)

    def no_bit(msg, ctx, call_next):
        reply = call_next(msg, ctx)
        if ctx.node_id == 102:
            del reply.content["metrics"]["cepam-unclipped"]
        return reply

    st = sampled(clip_quantile=0.5, clip_count_sigma=0.01)
    ctxs = node_contexts(range(101, 105))
    _, replies = run_round(st, ctxs)
    st.aggregate_train(1, replies)
    assert st._round_settings()[0] < CLIP
    _, replies = run_round(st, ctxs, rnd=2, mods=(old_clip, no_bit, cepam_mod))
    _, metrics = st.aggregate_train(2, replies)
    assert metrics["cepam-updates"] == 2 and metrics["cepam-dropped"] == 2
    assert "clip (1.0, expected" in caplog.text and "clipped-or-not bit" in caplog.text


def test_the_mod_reports_a_noised_bit_only_when_asked():
    st = sampled(clip=0.3, clip_count_sigma=0.5)
    _, replies = run_round(st, node_contexts(range(101, 105)))
    bits = [r.content["metrics"]["cepam-unclipped"] for r in replies]
    assert len(set(bits)) == 4 and all(isinstance(b, float) for b in bits)
    _, replies = run_round(sampled(), node_contexts(range(101, 105)))
    assert all("cepam-unclipped" not in r.content["metrics"] for r in replies)


def test_max_epsilon_stops_before_a_round_that_would_not_fit():
    event = add_remove_round()
    budget = 0.5 * (composed([event] * 2) + composed([event] * 3))  # two rounds fit
    st = sampled(sample_rate=0.8, relation="add-remove", sampling_seed=2, max_epsilon=budget,
                 mechanism=cepam.Gaussian(sigma=2.0))
    grid = FakeGrid(range(101, 111))  # no node replies: each round is accounted all the same
    result = st.start(grid=grid, initial_arrays=global_arrays(), num_rounds=4)
    assert st.stopped_by_budget and sorted(result.train_metrics_clientapp) == [1, 2]
    rounds = {int(m.content["cepam"]["round"]) for m in grid.sent
              if "cepam" in m.content.config_records}
    assert rounds <= {1, 2}


def test_a_run_a_ledger_cannot_hold_fails_before_any_message(tmp_path):
    """A client-level run on a ledger of record-level rounds (another level),
    and an add/remove run on a replace-one ledger, stop at the start: they
    used to fail at the first round's release, after the clients trained."""
    from cepam.accounting import CepamGaussianRound, FLSetting, Ledger

    path = tmp_path / "privacy.db"
    setting = FLSetting(clip=CLIP, clients=4, samples_per_round=5, dataset_size=100)
    with Ledger(path, delta=DELTA) as ledger:
        ledger.record(CepamGaussianRound(sigma=SIGMA, setting=setting), run_id="before")
    for kwargs in (dict(sample_rate=0.5), dict(relation="add-remove", sample_rate=0.5)):
        st = sampled(ledger=path, **kwargs)
        grid = FakeGrid()
        with pytest.raises(cepam.InvalidArgumentError, match="one level|one neighbouring"):
            st.start(grid=grid, initial_arrays=global_arrays(), num_rounds=2)
        assert grid.sent == []
