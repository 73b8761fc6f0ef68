"""Command-line conventions: missing extras, errors, exit codes, help, version.

Commands whose optional dependency is the point run in a subprocess whose
import system hides that dependency (a meta-path finder that raises
ModuleNotFoundError for it, as a Python without the package does), so they
see what a user who ran only ``pip install .`` sees.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

import cepam
from cepam.cli import build_parser, main

from helpers.hidden_imports import hiding, run_without

from helpers.paths import ROOT

MNIST_DIR = ROOT.parent / "shared" / "data" / "mnist"
RUNS = ROOT / "docs" / "experiments" / "runs"

_MAIN = "from cepam.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def cepam_cli(*argv: str, without: tuple[str, ...] = (), cwd: Path | None = None
              ) -> subprocess.CompletedProcess:
    """Runs ``cepam ARGV`` in a fresh interpreter in which ``without`` cannot be imported."""
    return run_without(without, _MAIN, *argv, cwd=cwd or ROOT)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[0]


PRIVACY = ("privacy", "--sigma", "0.5", "--clip", "1", "--clients", "30", "--samples-per-round", "15",
           "--dataset-size", "1666", "--delta", "1e-5")


@pytest.mark.parametrize("argv, without, hint", [
    (PRIVACY, ("scipy",), 'pip install "cepam[privacy]"'),
    (("bench", "bitrate", "--quick"), ("scipy",), 'pip install "cepam[bench]"'),
    (("fl", "run", "--out", "OUT"), ("torch",), "pip install torch==2.13.0"),
    (("fl", "run", "--out", "OUT"), ("scipy",), 'pip install "cepam[fl]"'),
    (("fl", "plot", str(RUNS), "--out", "OUT"), ("matplotlib",), 'pip install "cepam[fl]"'),
    (("fl", "table", str(RUNS), "--delta", "0.01"), ("scipy",), 'pip install "cepam[fl]"'),
])
def test_a_missing_extra_is_one_line_naming_the_install_command(tmp_path, argv, without, hint):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    proc = cepam_cli(*argv, without=without, cwd=tmp_path)
    for other in ("torch", "scipy", "matplotlib", "tqdm"):
        if other not in without and f"needs {other}," in proc.stderr:
            pytest.importorskip(other)  # missing here too, so named first
    assert proc.returncode == 1
    command = " ".join(argv[:2] if argv[0] in ("fl", "bench") else argv[:1])
    assert one_line_error(proc) == (f"cepam {command}: error: needs {without[0]}, which is not "
                                    f"installed; install it with: {hint}")
    assert not (tmp_path / "out").exists() and not any(tmp_path.iterdir())  # nothing started


def test_fl_table_needs_neither_torch_nor_matplotlib():
    proc = cepam_cli("fl", "table", str(RUNS), "--markdown",
                     without=("torch", "matplotlib", "scipy"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| Method | MLP test acc (%, mean ± sd)")
    assert "| CEPAM-Gaussian (n=1) | 91.36 ± 0.22 | 2.67 | 94.38 ± 0.48 | 3.74 |" in proc.stdout


def test_errors_are_one_line_with_conventional_exit_codes(tmp_path):
    proc = cepam_cli("inspect", str(tmp_path / "nonexistent"))
    assert proc.returncode == 1
    assert one_line_error(proc) == \
        f"cepam inspect: error: {tmp_path / 'nonexistent'}: No such file or directory"
    # --debug shows the traceback instead.
    proc = cepam_cli("--debug", "inspect", str(tmp_path / "nonexistent"))
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "FileNotFoundError" in proc.stderr


def test_fl_run_without_its_data_is_an_error_not_a_usage_error(tmp_path):
    pytest.importorskip("torch")
    proc = cepam_cli("fl", "run", "--rounds", "1", "--out", str(tmp_path / "o"),
                     "--data-dir", str(tmp_path / "no-mnist"), cwd=tmp_path)
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert line.startswith("cepam fl run: error: MNIST file ") and "not found in" in line


@pytest.mark.parametrize("option, value", [("--threads", "0"), ("--seeds", "0"), ("--seeds", "-1"),
                                           ("--clients", "0"), ("--rounds", "-1")])
def test_fl_run_refuses_counts_out_of_range(tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exc:
        main(["fl", "run", "--out", str(tmp_path / "o"), option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: must be a " in err and "integer" in err and f"got {value}" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("error, code, message", [
    (ModuleNotFoundError("No module named 'scipy'", name="scipy"), 1,
     "needs scipy, which is not installed; install it with: pip install scipy"),
    (ModuleNotFoundError("No module named 'nothere'", name="nothere"), 1,
     "No module named 'nothere' (run cepam --debug ... for the traceback)"),
    (RuntimeError("boom"), 1, "RuntimeError: boom (run cepam --debug ... for the traceback)"),
    (cepam.FormatError("bad magic"), 1, "bad magic"),
    (cepam.InvalidArgumentError("sigma must be positive"), 2, "sigma must be positive"),
])
def test_every_failure_is_one_line(tmp_path, monkeypatch, capsys, error, code, message):
    def fail(payload, **kwargs):
        raise error

    monkeypatch.setattr("cepam.inspection.inspect", fail)
    path = tmp_path / "p.bin"
    path.write_bytes(b"x")
    assert main(["inspect", str(path)]) == code
    assert capsys.readouterr().err == f"cepam inspect: error: {message}\n"
    with pytest.raises(type(error)):
        main(["--debug", "inspect", str(path)])


def test_interrupt_is_one_line_and_exit_code_130(tmp_path, monkeypatch, capsys):
    def interrupted(payload, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("cepam.inspection.inspect", interrupted)
    path = tmp_path / "p.bin"
    path.write_bytes(b"x")
    assert main(["inspect", str(path)]) == 130
    assert capsys.readouterr().err == "cepam inspect: interrupted\n"


# The run checkpoints round 1, says so in the file argv[1], and waits there
# (signal.pause) until a signal comes: the interrupt lands mid-run however
# fast the machine trains.
_HELD_AFTER_ROUND_1 = """
import pathlib, signal
import cepam.fl.builtin_engine as _engine
_held = pathlib.Path(sys.argv.pop(1))
_save_state = _engine.save_state
def _save_and_hold(directory, config, round_, *args, **kwargs):
    _save_state(directory, config, round_, *args, **kwargs)
    if round_ >= 1:
        _held.touch()
        while True:
            signal.pause()
_engine.save_state = _save_and_hold
"""


@pytest.mark.skipif(not MNIST_DIR.is_dir(), reason="MNIST not available")
def test_ctrl_c_during_fl_run(tmp_path):
    pytest.importorskip("torch")  # fl run trains (without torch it stops at once)
    out, held = tmp_path / "results", tmp_path / "held"
    argv = ["fl", "run", "--rounds", "5", "--clients", "2", "--samples-per-client", "20",
            "--train-size", "200", "--val-size", "20", "--test-size", "20", "--sgd-steps", "2",
            "--out", str(out), "--data-dir", str(MNIST_DIR), "--threads", "1", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-c", hiding((), _HELD_AFTER_ROUND_1 + _MAIN),
                             str(held), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal, even where pytest itself runs with
                            # SIGINT ignored (a background job of a shell)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while not held.exists():  # round 1 checkpointed; the run waits there, mid-run
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == \
        "cepam fl run: interrupted; run the same command again to resume"


def test_meta_tensor_is_refused_clearly():
    torch = pytest.importorskip("torch")
    update = {"w": torch.zeros(3, device="meta")}
    with pytest.raises(cepam.InvalidArgumentError, match="device 'meta'"):
        cepam.encode(update, cepam.Gaussian(sigma=1.0), secret=bytes(32), round=0, client=0)


def test_version_comes_from_the_package_metadata(capsys):
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cepam.__version__ == importlib.metadata.version("cepam") == pyproject
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"cepam {pyproject}\n"


def test_version_without_installed_metadata_reads_pyproject(monkeypatch):
    from cepam import _version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version.metadata, "version", not_installed)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    # A source tree reads its pyproject.toml; an installed copy (site-packages,
    # as in CI) has none beside it and says so.
    in_tree = Path(_version.__file__).resolve().is_relative_to(ROOT)
    assert _version.package_version() == (pyproject if in_tree else "0+unknown")


def _parsers(parser: argparse.ArgumentParser, name: str = "cepam"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_argument_has_help_and_every_default_is_shown():
    parsers = list(_parsers(build_parser()))
    assert {"cepam fl run", "cepam fl table", "cepam privacy", "cepam bench bitrate",
            "cepam inspect", "cepam demo"} <= {n for n, _ in parsers}
    for name, parser in parsers:
        text = parser.format_help()
        assert "``" not in text and ":func:" not in text and ":mod:" not in text, name
        assert "%%" not in text, name
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help, f"{name} {action.dest}: no help text"
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                helped = parser._get_formatter()._expand_help(action)
                assert "default" in helped, f"{name} {action.option_strings[0]}: default not shown"
    run_help = dict(_parsers(build_parser()))["cepam fl run"].format_help()
    for option, default in (("--sigma", "0.001"), ("--seeds", "1"), ("--clients", "30"),
                            ("--sgd-steps", "15"), ("--batch-size", "1"), ("--lr", "0.01")):
        assert re.search(rf"{option} .*?\(default {re.escape(default)}\)", run_help, re.S), option


def test_inspect_prints_text_by_default_and_json_on_request(tmp_path, capsys):
    payload = cepam.encode({"w": np.zeros((3, 4), np.float32)}, cepam.Gaussian(sigma=1.0),
                           secret=bytes(32), round=1, client=2)
    path = tmp_path / "p.bin"
    path.write_bytes(payload)
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert "client: 2" in text and "  w  numpy float32 3x4" in text
    assert f"  total: {8 * len(payload)}" in text
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["client"] == 2


def test_py_typed_ships_with_the_package():
    import importlib.resources

    assert importlib.resources.files("cepam").joinpath("py.typed").is_file()
    assert (ROOT / "python" / "cepam" / "py.typed").is_file()


def test_bench_bitrate_writes_a_fresh_directory_by_default(tmp_path, monkeypatch, capsys):
    pytest.importorskip("scipy")
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "bitrate", "--quick", "--m", "2000", "--draws", "200", "--no-plot"]
    assert main(argv) == 0
    assert main(argv) == 0
    folders = sorted(tmp_path.glob("cepam-bitrate-*"))
    assert len(folders) == 2  # a second run never overwrites the first
    for folder in folders:
        assert re.fullmatch(r"cepam-bitrate-\d{8}-\d{6}(-\d+)?", folder.name)
        assert sorted(p.name for p in folder.iterdir()) == ["bitrate.csv", "bitrate.md"]
    out, err = capsys.readouterr()
    assert f"wrote bitrate.csv, bitrate.md to {folders[0]}" in err
    assert out == ""  # the report is written to its folder only
    assert not (tmp_path / "docs").exists()


@pytest.mark.parametrize("argv", [("--help",), ("demo", "--json"), ("fl", "run", "--help"),
                                  ("fl", "table", "--help"), ("fl", "plot", "--help"),
                                  ("privacy", "--help"), ("privacy", "ledger", "--help"),
                                  ("bench", "bitrate", "--help")])
def test_commands_that_need_no_extra_run_without_any(argv):
    proc = cepam_cli(*argv, without=("torch", "scipy", "matplotlib", "tqdm", "dp_accounting"))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    if "--help" in argv:
        assert proc.stdout.startswith(f"usage: cepam {' '.join(argv[:-1])}".rstrip())


def test_privacy_ledger_without_scipy_names_the_install_command(tmp_path):
    proc = cepam_cli("privacy", "ledger", str(tmp_path / "l.db"), without=("scipy",))
    assert proc.returncode == 1
    assert one_line_error(proc) == ("cepam privacy ledger: error: needs scipy, which is not "
                                    'installed; install it with: pip install "cepam[privacy]"')


@pytest.mark.skipif(not MNIST_DIR.is_dir(), reason="MNIST not available")
def test_fl_run_prints_eps_after_each_private_run(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main(["fl", "run", "--method", "fl", "cepam-gaussian", "--rounds", "1",
                 "--clients", "2", "--samples-per-client", "20", "--train-size", "200",
                 "--val-size", "20", "--test-size", "20", "--sgd-steps", "2",
                 "--out", str(tmp_path), "--data-dir", str(MNIST_DIR), "--threads", "1",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3  # the private run only: its two eps, then the warning
    assert re.fullmatch(r"cnn-cepam-gaussian-n1-\w+ seed 0: client level: \([0-9.e+]+, 1e-05\)-DP "
                        r"after 1 rounds \(replace-one client: .*; threat model: an "
                        r"honest-but-curious client; any local training loop; sigma = 0.001\)",
                        err[0])
    assert re.fullmatch(r"cnn-cepam-gaussian-n1-\w+ seed 0: record level: \([0-9.e+]+, 1e-05\)-DP "
                        r"after 1 rounds \(replace-one record: .*\); it holds only for the "
                        r"paper's loop: .* \(this run's loop: 2 steps x batch 1 = 2 samples a "
                        r"round\)", err[1])
    assert err[2].startswith("warning: ") and "not meaningfully" in err[2]


@pytest.mark.parametrize("argv", [("inspect", "{missing}"), ("fl", "table", "{missing}"),
                                  ("privacy", "ledger", "{missing}")])
def test_a_missing_path_exits_1_in_every_command(tmp_path, capsys, argv):
    """A path that does not exist is an error (exit 1), as a file that
    cannot be read, not a usage error (2), whichever command is given it."""
    if argv[0] == "privacy":
        pytest.importorskip("scipy")  # without it, the command names the extra first
    missing = str(tmp_path / "missing")
    assert main([a.format(missing=missing) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cepam {' '.join(argv[:-1])}: error: ") and missing in err
    assert err.count("\n") == 1


def test_privacy_ledger_is_in_the_privacy_usage_line(capsys):
    with pytest.raises(SystemExit):
        main(["privacy", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert usage.startswith("usage: cepam privacy ")
    assert "\n       cepam privacy ledger " in usage and usage.rstrip().endswith("path")


@pytest.mark.parametrize("argv", [("inspect", "{dir}"), ("inspect", ""),
                                  ("inspect", "{payload}", "--secret-file", "{dir}"),
                                  ("inspect", "{payload}", "--secret-file", ""),
                                  ("privacy", "ledger", "{dir}"), ("privacy", "ledger", "")])
def test_a_directory_or_an_empty_path_for_a_file_exits_1_naming_it(tmp_path, capsys, argv):
    """A directory where a file is read, or an empty path (which names
    none), is a file that cannot be read: exit 1 in every command (it was 2
    for --secret-file and the ledger, whose "" was shown as '.')."""
    if argv[0] == "privacy":
        pytest.importorskip("scipy")
    payload = tmp_path / "p.bin"
    payload.write_bytes(cepam.encode(np.zeros(4), cepam.Gaussian(sigma=1.0), secret=bytes(32),
                                     round=0, client=0))
    words = [a.format(dir=tmp_path, payload=payload) for a in argv]
    assert main(words) == 1
    err = capsys.readouterr().err
    command = " ".join(argv[:2] if argv[0] == "privacy" else argv[:1])
    assert err.count("\n") == 1 and err.startswith(f"cepam {command}: error: ")
    shown = str(tmp_path) if "{dir}" in argv else "''"
    assert shown in err and "'.'" not in err


def test_bench_bitrate_seeds_are_bounded_so_nothing_derived_overflows(tmp_path, capsys):
    """2^63 and seeds just below it (whose ``seed + 7 + k`` overflowed a
    signed 64-bit nonce field) crashed after the run had started, exit 1."""
    for seed in (2**63, 2**63 - 8, 2**62):
        with pytest.raises(SystemExit) as info:
            main(["bench", "bitrate", "--quick", "--m", "500", "--draws", "50", "--no-plot",
                  "--out", str(tmp_path / "o"), "--seed", str(seed)])
        assert info.value.code == 2
        assert (f"--seed: must be a non-negative integer at most {2**62 - 1}, got {seed}"
                in capsys.readouterr().err)
        assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):
        main(["bench", "bitrate", "--help"])
    assert "(2^62 - 1)" in capsys.readouterr().out


def test_bench_bitrate_runs_at_the_largest_seed(tmp_path, capsys):
    pytest.importorskip("scipy")
    from cepam.bitrate.benchmark import MAX_SEED

    assert main(["bench", "bitrate", "--quick", "--m", "500", "--draws", "50", "--no-plot",
                 "--seed", str(MAX_SEED), "--out", str(tmp_path / "o")]) == 0
    import csv

    with open(tmp_path / "o" / "bitrate.csv", newline="") as f:
        statuses = {row["status"] for row in csv.DictReader(f)}
    assert statuses <= {"ok", "spec", "not computed", "not available"}, statuses


def test_bench_bitrate_needs_two_draws(tmp_path, capsys):
    """With one, the ideal rates were silently "not computed" or replaced
    by the tabulated values, and the run exited 0."""
    with pytest.raises(SystemExit) as info:
        main(["bench", "bitrate", "--draws", "1", "--out", str(tmp_path / "o")])
    assert info.value.code == 2
    assert "--draws: must be an integer of at least 2, got 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["file", "empty", "uncreatable"])
def test_bench_bitrate_checks_out_before_the_run(tmp_path, monkeypatch, capsys, kind):
    """--out was checked only once the whole run was done."""
    pytest.importorskip("scipy")
    import cepam.bitrate.benchmark as benchmark

    monkeypatch.setattr(benchmark, "run_benchmark",
                        lambda **kwargs: pytest.fail("the run started"))
    out = {"file": tmp_path / "f", "empty": "", "uncreatable": tmp_path / "f" / "sub"}[kind]
    (tmp_path / "f").write_text("x")
    argv = ["bench", "bitrate", "--quick", "--no-plot", "--out", str(out)]
    if kind == "empty":
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2  # a bad value
        assert "--out: must be a directory path, got an empty string" in capsys.readouterr().err
        return
    assert main(argv) == 1  # a path that cannot be written
    err = capsys.readouterr().err
    assert err.startswith(f"cepam bench bitrate: error: {out}: ") and err.count("\n") == 1


def test_bench_bitrate_never_overwrites_results(tmp_path, capsys):
    """A second run into the same --out replaced bitrate.csv and .md; now
    it is refused before it starts, unless --overwrite."""
    pytest.importorskip("scipy")
    out = tmp_path / "o"
    argv = ["bench", "bitrate", "--quick", "--m", "500", "--draws", "50", "--no-plot",
            "--out", str(out)]
    assert main(argv) == 0
    before = (out / "bitrate.md").read_text()
    (out / "bitrate.md").write_text("earlier results")
    capsys.readouterr()
    assert main(argv + ["--seed", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cepam bench bitrate: error: {out / 'bitrate.csv'}: results of an "
                          "earlier run are there") and "--overwrite" in err
    assert "s/sigma" not in err  # refused before the run
    assert (out / "bitrate.md").read_text() == "earlier results"
    assert main(argv + ["--overwrite"]) == 0
    assert (out / "bitrate.md").read_text().split("\n")[0] == before.split("\n")[0]
