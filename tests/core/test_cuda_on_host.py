"""The host stand-in for the CUDA runtime (tests/native/cuda_on_host), on
which cepam._cuda_on_host runs the module's kernels: its own test kernels
(stand_in_test.cu), rewritten by translate.py and built by the C++ compiler
as the module's .cu files are, then run.  A thread that returns before a
barrier the others reach is refused, and two host threads launching one
kernel at once take turns on its __shared__ memory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import ROOT

ON_HOST = ROOT / "tests" / "native" / "cuda_on_host"
COMPILER = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")

pytestmark = pytest.mark.skipif(
    COMPILER is None or not sys.platform.startswith("linux"),
    reason="needs a C++ compiler and ucontext (Linux)")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """{check: "ok" or "FAILED" and its detail} from one run of the program."""
    out: Path = tmp_path_factory.mktemp("stand_in")
    source = out / "stand_in_test.cpp"
    subprocess.run([sys.executable, str(ON_HOST / "translate.py"),
                    str(ON_HOST / "stand_in_test.cu"), str(source)], check=True)
    program = out / "stand_in_test"
    subprocess.run([COMPILER, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
                    f"-I{ON_HOST}", str(source), "-o", str(program)], check=True)
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=300)
    # Each line: "ok NAME" or "FAILED NAME", maybe ": detail".
    lines = {line.partition(" ")[2].partition(":")[0]: line for line in run.stdout.splitlines()}
    assert (run.returncode == 0) == all(v.startswith("ok ") for v in lines.values()), run
    return lines


@pytest.mark.parametrize("check", ["barrier_after_return", "returns_after_the_barriers",
                                   "concurrent_launches"])
def test_the_stand_in(results: dict[str, str], check: str) -> None:
    assert results[check].startswith("ok "), results[check]
