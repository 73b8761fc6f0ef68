"""cepam.fl's engine table and run directories: the names config, CLI and
dispatch read; the files, checkpoint and resume rules every engine shares."""

import json

import pytest

from cepam.cli import build_parser
from cepam.errors import InvalidArgumentError
from cepam.fl import config as flconfig
from cepam.fl import engines, rundir
from cepam.fl.config import FLConfig


def test_config_cli_and_dispatch_read_one_table():
    assert flconfig.ENGINES == tuple(engines.ENGINES) == ("builtin", "flower")
    args = build_parser().parse_args(["fl", "run", "--out", "x", "--engine", "flower"])
    assert args.engine == "flower"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fl", "run", "--out", "x", "--engine", "ray"])
    with pytest.raises(InvalidArgumentError, match="engine must be one of"):
        FLConfig(engine="ray")
    with pytest.raises(InvalidArgumentError, match="engine must be one of"):
        engines.engine("ray")


def test_every_engine_loads_its_runner_and_checker():
    pytest.importorskip("torch")
    for name, engine in engines.ENGINES.items():
        assert engine.name == name and engine.summary
        assert callable(engine._load(engine.runner))
        if engine.checker is not None:
            assert callable(engine._load(engine.checker))


def test_an_engine_checks_what_it_cannot_run():
    pytest.importorskip("torch")
    engines.engine("builtin").check(FLConfig(method="fl-sdq", engine="builtin"))
    engines.engine("flower").check(FLConfig(method="cepam-gaussian", engine="flower"))
    with pytest.raises(InvalidArgumentError, match="built-in engine only"):
        engines.engine("flower").check(FLConfig(method="fl-sdq", engine="flower"))


def test_atomic_write_replaces_a_file_whole(tmp_path):
    path = tmp_path / "a.json"
    rundir.atomic_write(path, b"old")
    rundir.atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # no temporary left


def test_outputs_hold_the_rows_in_columns(tmp_path):
    config = FLConfig(rounds=1)
    rows = [{"round": 0, "lr": 0.1, "train_loss": float("nan"), "bits_measured": True}]
    rundir.write_config(tmp_path, config)
    rundir.write_outputs(tmp_path, config, rows, complete=False)
    assert FLConfig.from_dict(json.loads((tmp_path / "config.json").read_text())) == config
    doc = json.loads((tmp_path / "rounds.json").read_text())
    assert doc["columns"] == list(rundir.COLUMNS) and doc["complete"] is False
    csv_lines = (tmp_path / "rounds.csv").read_text().splitlines()
    assert csv_lines[0] == ",".join(rundir.COLUMNS)
    assert csv_lines[1].startswith("0,0.1,,")  # NaN is empty
    assert csv_lines[1].split(",")[rundir.COLUMNS.index("bits_measured")] == "true"


def test_a_checkpoint_resumes_only_its_own_configuration(tmp_path):
    torch = pytest.importorskip("torch")
    config = FLConfig(rounds=3)
    assert rundir.matching_state(tmp_path / "run", config) is None  # created, empty
    params = {"w": torch.arange(4.0)}
    rundir.save_state(tmp_path / "run", config, 2, params,
                      schedule={"lr": 0.05, "best": 0.5, "bad_rounds": 1}, rows=[{"round": 0}])
    params["w"] += 1  # the checkpoint holds a copy
    state = rundir.matching_state(tmp_path / "run", config.replace(rounds=9))
    assert state["round"] == 2 and state["schedule"]["lr"] == 0.05
    assert torch.equal(state["params"]["w"], torch.arange(4.0))
    with pytest.raises(InvalidArgumentError, match="another configuration"):
        rundir.matching_state(tmp_path / "run", config.replace(seed=config.seed + 1))
    state["version"] = rundir.STATE_VERSION + 1
    torch.save(state, tmp_path / "run" / "state.pt")
    with pytest.raises(InvalidArgumentError, match="unknown checkpoint version"):
        rundir.load_state(tmp_path / "run")
