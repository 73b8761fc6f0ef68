"""One accountant interface: the analyses' registry, their round events, what
they say an eps is, and their composition (cepam.accounting.analyses)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

import cepam  # noqa: E402
from cepam.accounting import (  # noqa: E402
    ANALYSES,
    Analysis,
    CepamGaussianRound,
    CepamLaplaceRound,
    ClientLevel,
    ClientLevelRound,
    FLSetting,
    PaperBound,
    PLDAccountant,
    TightBound,
    create_analysis,
    paper_gaussian_epsilon,
    paper_gaussian_round,
    paper_laplace_round,
    tight_gaussian_epsilon,
    tight_gaussian_round,
    tight_laplace_round,
)
from cepam.accounting.events import BOUND_FUNCTIONS  # noqa: E402
from cepam.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402

SETTING = FLSetting(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)
DELTA = 1e-5
LAPLACE_ROUND = {"tight": tight_laplace_round, "paper": paper_laplace_round}


def record(name, **setting):
    return create_analysis(name, setting=dataclasses.replace(SETTING, **setting))


# ------------------------------------------------------------------ the registry


def test_the_registry_holds_each_analysis_once():
    assert ANALYSES == {"paper": PaperBound, "tight": TightBound, "client": ClientLevel}
    for name, cls in ANALYSES.items():
        assert issubclass(cls, Analysis) and cls.name == name
    assert isinstance(create_analysis("paper", setting=SETTING), PaperBound)
    assert isinstance(create_analysis("tight", setting=SETTING), TightBound)
    assert isinstance(create_analysis("client", clip=1.0), ClientLevel)


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(InvalidArgumentError,
                       match="unknown analysis 'rdp'; known: 'paper', 'tight', 'client'"):
        create_analysis("rdp", setting=SETTING)
    with pytest.raises(InvalidTypeError, match="must be a str"):
        create_analysis(None, setting=SETTING)


def test_options_an_analysis_does_not_take_are_refused():
    with pytest.raises(InvalidTypeError, match="analysis 'client' takes clip"):
        create_analysis("client", setting=SETTING)
    with pytest.raises(InvalidTypeError, match="analysis 'tight' takes setting"):
        create_analysis("tight", clip=1.0)
    with pytest.raises(InvalidTypeError, match="FLSetting"):
        create_analysis("paper", setting="not a setting")


@pytest.mark.parametrize("options, match", [
    (dict(relation="add-remove", threat_model="server"), "no bound against"),
    (dict(relation="add-remove", sampling="fixed"), "replace-one' only"),
    (dict(relation="both"), "relation must be one of"),
    (dict(sample_rate=1.5), r"sample_rate must be in \(0, 1\]"),
    (dict(clip=0.0), "clip must be > 0"),
    (dict(count_sigma=-1.0), "count_sigma must be > 0"),
])
def test_a_client_level_analysis_checks_its_options(options, match):
    with pytest.raises(InvalidArgumentError, match=match):
        create_analysis("client", **{"clip": 1.0, **options})


def test_the_record_level_bounds_read_one_table():
    for name, (gdelta, geps, ground, lround) in {
            "tight": ("tight_gaussian_delta", tight_gaussian_epsilon, tight_gaussian_round,
                      tight_laplace_round),
            "paper": ("paper_gaussian_delta", paper_gaussian_epsilon, paper_gaussian_round,
                      paper_laplace_round)}.items():
        functions = BOUND_FUNCTIONS[name]
        assert create_analysis(name, setting=SETTING).functions is functions
        assert functions.gaussian_delta.__name__ == gdelta
        assert (functions.gaussian_epsilon, functions.gaussian_round,
                functions.laplace_round) == (geps, ground, lround)
        analysis = create_analysis(name, setting=SETTING)
        assert analysis.gaussian_epsilon(DELTA, sigma=0.3) == geps(DELTA, sigma=0.3,
                                                                   setting=SETTING)
        assert analysis.gaussian_round(2.0, sigma=0.3) == ground(2.0, sigma=0.3,
                                                                 setting=SETTING)


# ------------------------------------------------------------------ round events


@pytest.mark.parametrize("name", ["tight", "paper"])
@pytest.mark.parametrize("threat_model", ["client", "aggregate", "server"])
def test_a_record_level_round_is_the_event_built_directly(name, threat_model):
    analysis = record(name, threat_model=threat_model)
    for k in (2, 30, 7):
        setting = dataclasses.replace(SETTING, clients=k, threat_model=threat_model)
        event = analysis.round_event(cepam.Gaussian(sigma=0.4), clients=k)
        assert event == CepamGaussianRound(sigma=0.4, setting=setting, bound=name)
        laplace = analysis.round_event(cepam.Laplace(b=10.0), clients=k, dimension=100)
        assert laplace == CepamLaplaceRound(scale=10.0, setting=setting, dimension=100,
                                            bound=name)
        assert laplace.epsilon == LAPLACE_ROUND[name](scale=10.0, setting=setting,
                                                      dimension=100).epsilon
    eps = np.array([0.0, 0.1, 1.0, 3.0])
    assert np.array_equal(
        analysis.round_event(cepam.Gaussian(sigma=0.4), clients=30).privacy_profile(eps),
        CepamGaussianRound(sigma=0.4, setting=analysis.setting, bound=name).privacy_profile(eps))


@pytest.mark.parametrize("relation, threat_model", [
    ("replace-one", "client"), ("replace-one", "server"), ("add-remove", "aggregate")])
def test_a_client_level_round_is_the_event_built_directly(relation, threat_model):
    analysis = create_analysis("client", clip=2.0, threat_model=threat_model,
                               relation=relation, count_sigma=5.0)
    mechanism = cepam.Gaussian(sigma=0.3)
    common = dict(sigma=0.3, clip=2.0, threat_model=threat_model, relation=relation,
                  sampling="poisson", count_sigma=5.0)
    assert analysis.round_event(mechanism, clients=10) == ClientLevelRound(clients=10, **common)
    assert analysis.round_event(mechanism, clients=100, sample_rate=0.1) == \
        ClientLevelRound(clients=100, sample_rate=0.1, **common)
    sampled = create_analysis("client", clip=2.0, threat_model=threat_model,
                              relation=relation, count_sigma=5.0, sample_rate=0.01)
    assert sampled.round_event(mechanism, clients=10) == \
        ClientLevelRound(clients=10, sample_rate=0.01, **common)


def test_a_mechanism_an_analysis_does_not_cover_is_refused_naming_what_covers_it():
    client = create_analysis("client", clip=1.0)
    assert client.covers(cepam.Gaussian(sigma=1.0)) and not client.covers(cepam.Laplace(b=1.0))
    with pytest.raises(InvalidArgumentError,
                       match="'client' analysis does not cover cepam.Laplace: the analyses "
                             "'paper', 'tight' cover it"):
        client.round_event(cepam.Laplace(b=1.0), clients=10)
    for analysis in (client, record("tight"), record("paper")):
        with pytest.raises(InvalidArgumentError, match="cepam.SDQ: no analysis covers it"):
            analysis.round_event(cepam.SDQ(step=1.0), clients=10)
        with pytest.raises(InvalidTypeError, match="must be a cepam.Gaussian or cepam.Laplace"):
            analysis.round_event(0.5, clients=10)


def test_values_the_event_refuses_are_refused():
    with pytest.raises(InvalidArgumentError, match="clients >= 2"):
        record("tight").round_event(cepam.Gaussian(sigma=1.0), clients=1)
    with pytest.raises(InvalidTypeError, match="dimension"):
        record("tight").round_event(cepam.Laplace(b=1.0), clients=10)  # no dimension
    with pytest.raises(InvalidArgumentError, match="population"):
        create_analysis("client", clip=1.0).round_event(cepam.Gaussian(sigma=1.0),
                                                        clients=10.5, sample_rate=0.4)


# ------------------------------------------------------------------ what an eps is


@pytest.mark.parametrize("name", ["tight", "paper"])
@pytest.mark.parametrize("threat_model", ["client", "aggregate", "server"])
def test_describe_names_level_relation_threat_model_and_bound(name, threat_model):
    analysis = record(name, threat_model=threat_model)
    assert (analysis.level, analysis.relation, analysis.threat_model) == \
        ("record", "replace-one", threat_model)
    line = analysis.describe()
    assert "\n" not in line
    for word in ("record-level", "replace-one", f"threat model {threat_model!r}",
                 f"{name} bound", "the paper's loop"):
        assert word in line


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
@pytest.mark.parametrize("threat_model", ["client", "aggregate"])
def test_describe_names_the_client_level_relation_and_threat_model(relation, threat_model):
    analysis = create_analysis("client", clip=1.0, relation=relation, threat_model=threat_model)
    assert (analysis.level, analysis.relation, analysis.threat_model) == \
        ("client", relation, threat_model)
    assert analysis.describe() == f"client-level, {relation}, threat model {threat_model!r}"
    counted = create_analysis("client", clip=1.0, relation=relation,
                              threat_model=threat_model, count_sigma=4.0)
    assert counted.describe() == (f"client-level, {relation}, threat model {threat_model!r}, "
                                  "clipped-or-not bits noised with sd 4")


# ------------------------------------------------------------------ composition


@pytest.mark.parametrize("name", ["tight", "paper"])
def test_epsilon_of_gaussian_rounds_is_the_pld_accountant_s(name):
    analysis = record(name)
    rounds = [(analysis.round_event(cepam.Gaussian(sigma=0.5), clients=k), count)
              for k, count in ((30, 20), (12, 3), (30, 1))]
    expected = PLDAccountant()
    for event, count in rounds:
        expected.compose(event, count)
    assert analysis.epsilon(rounds, delta=DELTA) == expected.get_epsilon(DELTA)
    assert 0 < analysis.epsilon(rounds, delta=DELTA) < analysis.epsilon(
        rounds + [(rounds[0][0], 10)], delta=DELTA)


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
def test_epsilon_of_client_level_rounds_is_the_pld_accountant_s(relation):
    analysis = create_analysis("client", clip=1.0, relation=relation)
    rounds = [(analysis.round_event(cepam.Gaussian(sigma=0.1), clients=100, sample_rate=0.1),
               50), (analysis.round_event(cepam.Gaussian(sigma=0.1), clients=20), 2)]
    expected = PLDAccountant().compose(rounds[0][0], 50).compose(rounds[1][0], 2)
    assert analysis.epsilon(rounds, delta=DELTA) == expected.get_epsilon(DELTA)


@pytest.mark.parametrize("name", ["tight", "paper"])
def test_epsilon_of_laplace_rounds_is_the_sum_of_their_pure_eps(name):
    analysis = record(name)
    ks = [30, 12, 2, 30]
    events = [(analysis.round_event(cepam.Laplace(b=50.0), clients=k, dimension=10), 1)
              for k in ks]
    total = 0.0  # as flower.budget.Budget added the rounds up before the analyses
    for k in ks:
        total += LAPLACE_ROUND[name](scale=50.0, setting=dataclasses.replace(SETTING, clients=k),
                                     dimension=10).epsilon
    assert analysis.epsilon(events, delta=DELTA) == total > 0
    assert analysis.epsilon([(events[0][0], 3)], delta=DELTA) == 3 * events[0][0].epsilon


def test_laplace_and_gaussian_rounds_together_compose_by_pld():
    analysis = record("tight")
    gaussian = analysis.round_event(cepam.Gaussian(sigma=0.5), clients=30)
    laplace = analysis.round_event(cepam.Laplace(b=50.0), clients=30, dimension=10)
    expected = PLDAccountant().compose(gaussian, 2).compose(laplace, 3).get_epsilon(DELTA)
    assert analysis.epsilon([(gaussian, 2), (laplace, 3)], delta=DELTA) == expected


@pytest.mark.parametrize("bound", sorted(LAPLACE_ROUND))
def test_a_laplace_round_refuses_a_dimension_beyond_float64(bound):
    """It raised OverflowError: int too large to convert to float."""
    with pytest.raises(InvalidArgumentError, match="float64"):
        LAPLACE_ROUND[bound](scale=1.0, setting=SETTING, dimension=2**1100)


def test_epsilon_checks_its_arguments():
    analysis = record("tight")
    event = analysis.round_event(cepam.Gaussian(sigma=0.5), clients=30)
    assert analysis.epsilon([], delta=DELTA) == 0.0
    with pytest.raises(InvalidArgumentError, match="delta"):
        analysis.epsilon([(event, 1)], delta=1.0)
    with pytest.raises(InvalidArgumentError, match="count must be >= 1"):
        analysis.epsilon([(event, 0)], delta=DELTA)
    with pytest.raises(InvalidTypeError, match=r"\(event, count\) pairs"):
        analysis.epsilon([event], delta=DELTA)
    with pytest.raises(InvalidTypeError, match="not a privacy event"):
        analysis.epsilon([("event", 1)], delta=DELTA)
    with pytest.raises(InvalidTypeError, match=r"\(event, count\) pairs"):
        analysis.epsilon(3, delta=DELTA)
