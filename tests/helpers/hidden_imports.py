"""Runs Python in a fresh interpreter whose import system hides some
packages (a meta-path finder that raises ModuleNotFoundError for them, as a
Python without them does), so that a test sees what a user who ran only
``pip install .`` sees.  Not a test module: the tests import it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["hiding", "run_without"]

_PRELUDE = """
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
for m in [m for m in sys.modules if m.split(".")[0] in {blocked!r}]:
    del sys.modules[m]
"""


def hiding(without: tuple[str, ...] | set[str], code: str) -> str:
    """``code`` preceded by the lines that hide the packages ``without``."""
    return _PRELUDE.format(blocked=set(without)) + code


def run_without(without: tuple[str, ...] | set[str], code: str, *argv: str,
                cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs ``python -c code argv...`` with ``without`` hidden; text output captured."""
    return subprocess.run([sys.executable, "-c", hiding(without, code), *argv],
                          capture_output=True, text=True, cwd=cwd)
