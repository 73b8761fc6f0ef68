"""``cepam fl run --engine flower`` and the example app in examples/flower.

The engine runs 4 clients for 2 rounds on Flower's simulation engine and
must write the built-in engine's files and columns, with measured bits and
the built-in engine's eps.  The example's ClientApp is called by hand (no
Ray): its reply, encoded by cepam_mod, must decode on CepamStrategy.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")
pytest.importorskip("ray")

from cepam.fl.data import FILES, load_mnist  # noqa: E402
from cepam.fl.experiment import COLUMNS, FLConfig, TensorMNIST  # noqa: E402
from cepam.fl.flower_engine import run_flower_experiment  # noqa: E402
from cepam.fl.privacy import config_epsilon_function  # noqa: E402

from helpers.paths import ROOT as REPO

MNIST_DIR = next((p for p in (REPO.parent / "shared" / "data" / "mnist",
                               Path(os.environ.get("CEPAM_DATA") or REPO / "missing"))
                  if all((p / f).is_file() for f in FILES.values())), None)
pytestmark = pytest.mark.skipif(MNIST_DIR is None,
                                reason="MNIST not found in ../shared/data/mnist")


@pytest.mark.slow  # (a Flower simulation on Ray)
def test_flower_engine_writes_the_builtin_files(tmp_path):
    config = FLConfig(model="cnn", method="cepam-gaussian", clients=4, rounds=2,
                      samples_per_client=100, sgd_steps=5, train_size=2000, val_size=500,
                      test_size=500, sigma=0.01, engine="flower")
    data = TensorMNIST(load_mnist(MNIST_DIR))
    result = run_flower_experiment(config, data, tmp_path, data_dir=str(MNIST_DIR))
    assert result.complete and [r["round"] for r in result.rows] == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "rounds.csv", "rounds.json", "state.pt"]
    doc = json.loads((tmp_path / "rounds.json").read_text())
    assert doc["columns"] == list(COLUMNS) and doc["complete"]
    assert FLConfig.from_dict(doc["config"]) == config
    eps = config_epsilon_function(config, delta=config.delta, dataset_size=100,
                                  coordinates=6422)
    for row in doc["rows"][1:]:
        assert row["bits_measured"] and 0 < row["bits_per_coordinate"] < 32 / 8
        assert row["epsilon"] == pytest.approx(eps(row["round"]), rel=1e-6)
        assert 0.0 <= row["test_acc"] <= 1.0
        assert isinstance(row["seconds"], float)  # recorded (its value is a timing)
        assert row["train_seconds"] is None  # NaN: not split on Flower
    # A finished directory is returned as it is.
    again = run_flower_experiment(config, data, tmp_path, data_dir=str(MNIST_DIR))
    assert [r["test_acc"] for r in again.rows] == [r["test_acc"] for r in result.rows]


def test_example_client_reply_decodes_on_the_strategy(monkeypatch):
    from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
    from flwr.serverapp.strategy import FedAvg

    import cepam
    from cepam.flower import CepamStrategy

    try:
        from flwr.supercore.task_identity import TaskIdentity

        monkeypatch.setattr(TaskIdentity, "_run_id", 5)
        monkeypatch.setattr(TaskIdentity, "_node_id", 1)
        monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    except ImportError:  # Flower 1.41
        pass
    monkeypatch.syspath_prepend(str(REPO / "examples" / "flower"))
    client_app = importlib.import_module("cepam_flower_example.client_app")
    task = importlib.import_module("cepam_flower_example.task")
    run_config = {"data-dir": str(MNIST_DIR), "num-clients": 30, "seed": 0, "sgd-steps": 5,
                  "lr": 0.01, "momentum": 0.9}

    class Grid:
        class run:  # noqa: N801
            run_id = 5

        def get_node_ids(self):
            return [31, 32]

    strategy = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=1e-3), clip=1.0)
    net = task.model(0)
    messages = list(strategy.configure_train(1, ArrayRecord(net.state_dict()), ConfigRecord(),
                                             Grid()))
    replies = []
    for msg in messages:
        node = msg.metadata.dst_node_id
        ctx = Context(run_id=5, node_id=node, node_config={"partition-id": node - 31},
                      state=RecordDict(), run_config=run_config)
        replies.append(client_app.app(msg, ctx))  # the mods, then train
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 2 and arrays is not None
    assert math.isfinite(metrics["train-loss"])
    for name in [m for m in sys.modules if m.startswith("cepam_flower_example")]:
        sys.modules.pop(name)
