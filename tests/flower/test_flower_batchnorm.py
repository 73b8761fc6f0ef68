"""A Flower user's model on Flower's simulation engine (Ray): BatchNorm, Flower's loop.

Three SuperNodes train a small torch MLP with BatchNorm (float running
statistics and an integer ``num_batches_tracked`` that counts up in
training) through ``cepam_mod`` and ``CepamStrategy(FedAvg())`` with the
defaults (X25519 key agreement, ``pad="levels"``).  The server's Grid sends
every round one node's reply twice.  Checked:

* the model trains: the server's accuracy (eval mode, so on the running
  statistics the clients sent) rises from chance, and the running
  statistics moved; the counter stays the server's own;
* the duplicated reply is counted once (``cepam-updates`` = 3, one drop);
* the strategy's log holds Flower's own lines: the initial evaluation, the
  per-round "Aggregated MetricRecord", the final summary;
* a second run on the first run's ledger, whose budget cannot afford one
  more round, sends no train message.
"""

from __future__ import annotations

import copy
import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")
pytest.importorskip("ray")
pytest.importorskip("cryptography")

# One Flower simulation on Ray (its start-up alone takes tens of seconds):
# the slow step of CI (python -m pytest -m slow).
pytestmark = pytest.mark.slow

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

import cepam  # noqa: E402
from cepam.accounting import FLSetting, Ledger  # noqa: E402
from cepam.flower import CepamStrategy, cepam_mod  # noqa: E402

NODES, ROUNDS, FEATURES = 3, 3, 8
SETTING = FLSetting(clip=5.0, clients=NODES, samples_per_round=30, dataset_size=256)
RECORD: dict = {}


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 2))


def data(seed: int, n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = 3.0 + 2.0 * torch.randn(n, FEATURES, generator=g)  # far from BatchNorm's init stats
    return x, (x[:, 0] > 3.0).long()


client = ClientApp(mods=[cepam_mod])


@client.train()
def train(msg: Message, ctx: Context) -> Message:
    net = model()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = data(10 + int(ctx.node_config["partition-id"]))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    net.train()
    g = torch.Generator().manual_seed(int(msg.content["config"]["server-round"]))
    for _ in range(SETTING.samples_per_round):
        idx = torch.randint(len(y), (32,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()
    return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()),
                               "metrics": MetricRecord({"num-examples": len(y)})}),
                   reply_to=msg)


def duplicating(grid: Grid) -> Grid:
    """The run's Grid, made to hand the strategy one train reply twice and to
    count the train messages sent."""
    send = grid.send_and_receive

    def send_and_receive(messages, *, timeout=None):
        messages = list(messages)
        RECORD["train-messages"] += sum(m.metadata.message_type == "train" for m in messages)
        replies = list(send(messages, timeout=timeout))
        if replies and messages and messages[0].metadata.message_type == "train":
            replies.append(copy.deepcopy(replies[0]))
        return replies

    grid.send_and_receive = send_and_receive
    return grid


def accuracy(arrays: ArrayRecord) -> float:
    net = model()
    net.load_state_dict(arrays.to_torch_state_dict())
    net.eval()
    x, y = data(99, 2000)
    with torch.no_grad():
        return float((net(x).argmax(1) == y).float().mean())


server = ServerApp()


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    strategy = CepamStrategy(
        FedAvg(fraction_evaluate=0.0, min_train_nodes=NODES, min_available_nodes=NODES),
        mechanism=cepam.Gaussian(sigma=1e-3), clip=SETTING.clip, setting=SETTING,
        ledger=RECORD["ledger"], max_epsilon=RECORD["max_epsilon"])
    result = strategy.start(
        grid=duplicating(grid), initial_arrays=ArrayRecord(model().state_dict()),
        num_rounds=ROUNDS,
        evaluate_fn=lambda rnd, arrays: MetricRecord({"accuracy": accuracy(arrays)}))
    RECORD.update(result=result, stopped=strategy.stopped_by_budget)


class Lines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        RECORD["log"].append(record.getMessage())


def simulate(ledger, max_epsilon):
    RECORD.update({"train-messages": 0, "log": [], "ledger": ledger,
                   "max_epsilon": max_epsilon})
    RECORD.pop("result", None)
    handler = Lines()
    logging.getLogger("flwr").addHandler(handler)
    try:
        run_simulation(server_app=server, client_app=client, num_supernodes=NODES,
                       backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                       "init_args": {"num_cpus": 2,
                                                     "logging_level": logging.ERROR,
                                                     "log_to_driver": False}})
    finally:
        logging.getLogger("flwr").removeHandler(handler)
    assert "result" in RECORD, "the ServerApp did not finish"
    return dict(RECORD)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    path = tmp_path_factory.mktemp("ledger") / "privacy.db"
    first = simulate(str(path), None)
    with Ledger(path) as ledger:
        spent = ledger.epsilon()
    second = simulate(str(path), spent * 1.0001)  # not one more round
    return first, second


def test_a_batchnorm_model_trains_through_cepam_mod(runs):
    first, _ = runs
    result = first["result"]
    acc = {r: m["accuracy"] for r, m in result.evaluate_metrics_serverapp.items()}
    assert sorted(acc) == list(range(ROUNDS + 1))
    assert acc[0] < 0.75 and acc[ROUNDS] > 0.9, acc
    final = result.arrays.to_torch_state_dict()
    initial = model().state_dict()
    assert not torch.allclose(final["1.running_mean"], initial["1.running_mean"])
    assert final["1.running_mean"].abs().mean() > 0.5  # moved toward the data's statistics
    assert int(final["1.num_batches_tracked"]) == 0  # the server's own counter


def test_a_duplicated_reply_is_counted_once(runs):
    first, _ = runs
    for metrics in first["result"].train_metrics_clientapp.values():
        assert metrics["cepam-updates"] == NODES and metrics["cepam-dropped"] == 1
    log = first["log"]
    # cepam's warning, and Flower's own count of the drop as a failure
    assert sum(line.startswith("cepam: ") and "a second reply from this node" in line
               for line in log) == ROUNDS
    assert sum("Received error in reply" in line and "dropped by cepam: a second reply" in line
               for line in log) == ROUNDS
    assert sum(f"Received {NODES} results and 1 failures" in line for line in log) == ROUNDS


def test_the_log_holds_flowers_own_lines(runs):
    first, _ = runs
    log = first["log"]
    assert any(line.startswith("Initial global evaluation results") for line in log)
    assert sum("Aggregated MetricRecord" in line for line in log) == ROUNDS
    assert sum(line.startswith("[ROUND ") for line in log) == ROUNDS
    assert "Final results:" in log
    metrics = first["result"].train_metrics_clientapp[ROUNDS]
    assert metrics["cepam-epsilon"] > 0 and metrics["cepam-client-epsilon"] > 0
    assert "cepam-payload-bytes" not in metrics  # pad="levels": sizes differ, none released


def test_a_second_run_that_cannot_afford_a_round_sends_no_train_message(runs):
    first, second = runs
    assert first["train-messages"] == NODES * ROUNDS
    assert second["stopped"] and second["train-messages"] == 0
    assert not second["result"].train_metrics_clientapp
