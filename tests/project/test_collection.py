"""The suite collects (skipping what it cannot run) on a Python with none of
the extras: numpy, pytest and cepam only, as after ``pip install .`` plus the
test runner (issue 22: without cryptography, collection stopped with
errors)."""

import subprocess
import sys

from helpers.hidden_imports import hiding

from helpers.paths import ROOT, TESTS

EXTRAS = ("torch", "scipy", "matplotlib", "cryptography", "flwr", "ray", "dp_accounting",
          "tqdm", "constriction")


def test_the_suite_collects_without_any_extra():
    code = hiding(EXTRAS, "import pytest\n"
                          "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider',"
                          " sys.argv[1]]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(TESTS)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "error" not in proc.stdout.splitlines()[-1], proc.stdout[-4000:]
    assert "SKIPPED" in proc.stdout  # the extras' tests are skipped, not collected
