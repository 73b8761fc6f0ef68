"""Poisson client sampling on Flower's simulation engine (Ray).

Eight SuperNodes train test_flower_simulation's softmax regression through
``cepam_mod`` (X25519 key agreement) and ``CepamStrategy(FedAvg(),
sample_rate=0.5, clip_count_sigma=...)`` (replace-one) for four
rounds with a fixed sampling seed.  Checked on the messages the server sent
and received:

* the number of train messages varies from round to round (the cohort the
  wrapper draws), every one goes to a distinct node, and every reply is a
  payload the server accepts;
* the client-level eps in each round's metrics is PLDAccountant's
  composition of one ClientLevelRound (n = q N = 4, q = 0.5, replace-one,
  the count's noise) per round run, whatever the cohort's size (an empty
  cohort's round too), and ``cepam-updates`` is the number of replies;
* the noised clipped fraction is published.

(Add-remove at q = 0.5 from 8 nodes has no finite eps at delta 1e-5: a
cohort outside [1, T], an empty one included, has chance 0.0078 a round,
paid for in delta; tests/flower/test_flower_sampling.py checks its
aggregation.)
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")
pytest.importorskip("cryptography")

# One Flower simulation on Ray (its start-up alone takes tens of seconds):
# the slow step of CI (python -m pytest -m slow).
pytestmark = pytest.mark.slow

from flwr.app import Array, ArrayRecord, Context  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

import cepam  # noqa: E402
from cepam.accounting import ClientLevelRound, PLDAccountant  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402
from helpers.grids import ObservedGrid, simulate  # noqa: E402
from test_flower_simulation import CLIP, DELTA, SIGMA, initial_model, train  # noqa: E402

NODES, ROUNDS, RATE, SEED, COUNT_SIGMA = 8, 4, 0.5, 4, 0.5
RECORD: dict = {}

client = ClientApp(mods=[cepam_mod])
client.train()(train)


def count(messages, replies) -> None:
    """Counts each round's train messages and good replies."""
    train = [m for m in messages if "cepam" in m.content.config_records]
    if train:
        rnd = int(train[0].content["cepam"]["round"])
        RECORD["sent"][rnd] = [int(m.metadata.dst_node_id) for m in train]
        RECORD["replied"][rnd] = sum(not r.has_error() for r in replies)

server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    strategy = CepamStrategy(
        FedAvg(fraction_evaluate=0.0, min_available_nodes=NODES, min_train_nodes=NODES),
        mechanism=cepam.Gaussian(sigma=SIGMA), clip=CLIP, delta=DELTA, pad=None,
        sample_rate=RATE, sampling_seed=SEED,
        clip_count_sigma=COUNT_SIGMA)
    result = strategy.start(
        grid=ObservedGrid(grid, count), initial_arrays=ArrayRecord(
            {k: Array(v) for k, v in initial_model().items()}), num_rounds=ROUNDS)
    RECORD.update(result=result, population=len(list(grid.get_node_ids())),
                  events=list(strategy.budget.events))


@pytest.fixture(scope="module")
def simulation():
    RECORD.clear()
    RECORD.update(sent={}, replied={})
    simulate(server, client, NODES)
    assert "result" in RECORD, "the ServerApp did not finish"
    return RECORD


def test_the_cohort_varies_and_the_accounted_eps_follows_the_rounds_run(simulation):
    assert simulation["population"] == NODES
    sizes = [len(simulation["sent"].get(rnd, [])) for rnd in range(1, ROUNDS + 1)]
    assert len(set(sizes)) > 1 and all(0 <= s < NODES for s in sizes)
    assert 0 in sizes  # the seed draws one empty cohort: its round is accounted too
    for nodes in simulation["sent"].values():
        assert len(set(nodes)) == len(nodes)
    for rnd, count in simulation["replied"].items():
        assert count == len(simulation["sent"][rnd])
    # One event a round run, for the population the inner strategy addressed
    # (min_train_nodes: all 8, even when FedAvg counts the nodes before they
    # have all connected, as it does before it waits for them).
    events = simulation["events"]
    assert len(events) == ROUNDS
    for event in events:
        assert event == ClientLevelRound(
            sigma=SIGMA, clip=CLIP, clients=RATE * NODES, threat_model="client",
            sample_rate=RATE, relation="replace-one", sampling="poisson",
            count_sigma=COUNT_SIGMA)
    metrics = simulation["result"].train_metrics_clientapp
    assert sorted(metrics) == list(range(1, ROUNDS + 1))  # an empty cohort's round too
    for rnd in range(1, ROUNDS + 1):
        acct = PLDAccountant()
        for event in events[:rnd]:
            acct.compose(event)
        eps = acct.get_epsilon(DELTA)
        assert metrics[rnd]["cepam-client-epsilon"] == pytest.approx(eps, rel=1e-9)
        assert "cepam-epsilon" not in metrics[rnd]  # no record-level claim
        if sizes[rnd - 1]:  # noised: any finite number
            assert metrics[rnd]["cepam-updates"] == sizes[rnd - 1]
            assert math.isfinite(metrics[rnd]["cepam-clipped-fraction"])
