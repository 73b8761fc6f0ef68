"""``cepam privacy``: the sub-command registered by ``cepam.accounting.cli``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from cepam.accounting import cli as privacy_cli
from cepam.errors import CepamError, InvalidArgumentError

PAPER_ARGS = ["--clip", "1", "--clients", "30", "--samples-per-round", "15",
              "--dataset-size", "1666"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cepam")
    sub = parser.add_subparsers(dest="command")
    privacy_cli.register(sub)
    return parser


def run(argv, capsys):
    pytest.importorskip("scipy", reason="cepam privacy needs scipy (cepam[privacy])")
    args = _parser().parse_args(["privacy", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


def test_issue_command_paper_bound_json(capsys):
    code, out = run(["--sigma", "0.001", *PAPER_ARGS, "--rounds", "80", "--delta", "1e-5",
                     "--bound", "paper", "--json", "--threat-model", "aggregate",
                     "--eps-tilde", "5.9"], capsys)
    assert code == 0
    rep = json.loads(out)
    assert rep["inputs"]["sigma"] == 0.001 and rep["inputs"]["rounds"] == 80
    assert rep["inputs"]["bound"] == "paper" and rep["method"]["per_round_bound"] == "paper"
    assert rep["method"]["composition"] == "pld"
    assert rep["per_round_at_eps_tilde"]["epsilon"] == pytest.approx(1.45, abs=0.01)
    assert rep["per_round_at_eps_tilde"]["delta"] == pytest.approx(0.0097, abs=5e-5)
    # no finite eps at delta = 1e-5: reported as null with an explanation
    assert rep["per_round"]["epsilon"] is None and rep["total"]["epsilon"] is None
    assert rep["total"]["delta"] == 1e-5 and rep["notes"]


def test_issue_command_tight_bound_json(capsys):
    code, out = run(["--sigma", "0.001", *PAPER_ARGS, "--rounds", "80", "--delta", "1e-5",
                     "--bound", "tight", "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["method"]["threat_model"] == "client"
    assert 1e4 < rep["per_round"]["epsilon"] < rep["total"]["epsilon"] < 1e6
    assert rep["sampling_probability"] == pytest.approx(0.0089659, rel=1e-4)


def test_moderate_sigma_and_text_output(capsys):
    code, out = run(["--sigma", "0.5", *PAPER_ARGS, "--rounds", "80", "--delta", "1e-5"], capsys)
    assert code == 0
    assert "after 80 rounds: eps = 0.31" in out and "bound: tight" in out


def test_target_eps_solves_for_sigma(capsys):
    code, out = run(["--target-eps", "1", *PAPER_ARGS, "--rounds", "80", "--delta", "1e-5",
                     "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["calibrated"] is True
    assert rep["sigma"] == pytest.approx(0.3235, rel=2e-3)
    assert rep["total"]["epsilon"] <= 1.0


def test_errors(capsys):
    with pytest.raises(InvalidArgumentError):
        run(["--sigma", "0.5", *PAPER_ARGS, "--delta", "0"], capsys)
    with pytest.raises(InvalidArgumentError):  # the record level needs the paper's loop
        run(["--sigma", "0.5", "--clip", "1", "--clients", "30", "--level", "record",
             "--delta", "1e-5"], capsys)
    with pytest.raises(CepamError):
        run(["--sigma", "-1", *PAPER_ARGS, "--delta", "1e-5"], capsys)
    with pytest.raises(SystemExit):  # --sigma and --target-eps are exclusive
        _parser().parse_args(["privacy", "--sigma", "1", "--target-eps", "1", *PAPER_ARGS,
                              "--delta", "1e-5"])
    with pytest.raises(SystemExit):  # one of them is required
        _parser().parse_args(["privacy", *PAPER_ARGS, "--delta", "1e-5"])


def test_each_level_refuses_the_others_options(capsys):
    """They were silently ignored (even --discretization -1 exited 0)."""
    client = ["--sigma", "1", "--clip", "1", "--clients", "10", "--delta", "1e-5"]
    for extra in (["--bound", "paper"], ["--eps-tilde", "nan"], ["--discretization", "-1"]):
        with pytest.raises(InvalidArgumentError, match="record-level"):
            run([*client, *extra], capsys)
    with pytest.raises(InvalidArgumentError, match="client-level"):
        run(["--sigma", "1", *PAPER_ARGS, "--delta", "1e-5", "--coordinates", "-1"], capsys)


def test_both_levels_name_their_relation(capsys):
    code, out = run(["--sigma", "0.5", *PAPER_ARGS, "--rounds", "8", "--delta", "1e-5"],
                    capsys)
    assert code == 0 and "relation: replace-one" in out
    code, out = run(["--sigma", "0.5", *PAPER_ARGS, "--rounds", "8", "--delta", "1e-5",
                     "--json"], capsys)
    rep = json.loads(out)
    assert rep["inputs"]["relation"] == "replace-one" and "example" in rep["method"]["relation"]


def test_a_client_level_eps_without_a_finite_bound_comes_with_a_note(capsys):
    code, out = run(["--sigma", "0.1", "--clip", "1", "--clients", "10", "--rounds", "50",
                     "--delta", "1e-12", "--sample-rate", "0.1", "--relation", "add-remove",
                     "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["total"]["epsilon"] is None
    assert any("no finite total eps" in note and "cap T" in note for note in rep["notes"])


def test_cli_module_imports_without_scipy():
    """The installed package (not the source tree, which has no compiled core)."""
    code = ("import sys, cepam.accounting.cli, cepam.accounting; "
            "sys.exit(1 if 'scipy' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_through_cepam_main(capsys):
    pytest.importorskip("cepam.demo")  # the top-level CLI lists it; present after merge
    pytest.importorskip("scipy", reason="cepam privacy needs scipy (cepam[privacy])")
    from cepam.cli import main

    assert main(["privacy", "--sigma", "0.5", *PAPER_ARGS, "--delta", "1e-5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["epsilon"] > 0
    assert main(["privacy", "--sigma", "0.5", *PAPER_ARGS, "--delta", "2"]) == 2


def test_the_old_local_steps_flag_is_refused_with_both_new_names(capsys):
    from cepam.cli import main

    pytest.importorskip("scipy", reason="cepam privacy needs scipy (cepam[privacy])")
    argv = ["privacy", "--sigma", "0.5", "--clip", "1", "--clients", "30", "--local-steps",
            "15", "--dataset-size", "1666", "--delta", "1e-5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("cepam privacy: error: local_steps (--local-steps) no longer exists")
    assert "--samples-per-round" in err and "--sgd-steps" in err
