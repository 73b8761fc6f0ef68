"""Scripts that fork: a check run in a forked child, for tests of what
keeps threads from call to call (the native worker pool, cepam._thread_pool).

Each script runs in a fresh interpreter (:func:`run_script`), so that what
the pools hold is what the script made."""

from __future__ import annotations

import subprocess
import sys


def in_forked_child(check: str) -> str:
    """Python source that forks and asserts, in the parent, that the
    expression ``check`` was true in the child."""
    return f"""
import os as _os
_read, _write = _os.pipe()
_pid = _os.fork()
if _pid == 0:
    _os.write(_write, b"ok" if ({check}) else b"no")
    _os._exit(0)
_os.close(_write)
assert _os.read(_read, 2) == b"ok", "the check failed in the forked child"
_os.waitpid(_pid, 0)
"""


def run_script(script: str) -> None:
    """Runs ``script`` in a fresh interpreter (warnings off) and asserts it
    exits 0."""
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-2000:]
