"""Same bytes on every platform: tools/cross_check.sh builds the native core
with GCC (run at every SIMD level), Clang, CEPAM_NO_SIMD and Debian's aarch64
cross compiler (run under qemu-aarch64 at the NEON and portable levels), and
compares the digests of the bodies tests/native/golden_digest.cpp encodes;
it also checks that the GCC/x86-only code compiles out under MSVC's macros
(tools/msvc_guard_scan.py).

Runs where the cross toolchain is installed (`apt-get install clang
g++-aarch64-linux-gnu qemu-user`; .ci/run installs it) and the source tree
is at hand; skips otherwise (e.g. against an installed wheel).  With
CEPAM_CROSS_CHECK_DIR set, it checks the run that .ci/run made there (the
script's work folder, its output in ``cross_check.log`` and exit status in
``status``) instead of running the script a second time.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.paths import ROOT

SCRIPT = ROOT / "tools" / "cross_check.sh"
TOOLS = ("cmake", "g++", "clang++", "aarch64-linux-gnu-g++", "qemu-aarch64")


def _cross_check(tmp_path: Path) -> tuple[Path, int, str]:
    """The script's work folder, exit status and output: of the run CI made
    (CEPAM_CROSS_CHECK_DIR), else of a fresh run in ``tmp_path``."""
    done = os.environ.get("CEPAM_CROSS_CHECK_DIR")
    if done:
        work = Path(done)
        status = int((work / "status").read_text())
        output = (work / "cross_check.log").read_text()
        if status == 2:  # (the script's status when a tool is missing)
            pytest.skip(f"cross toolchain not installed: {output.strip()}")
        return work, status, output
    if not (SCRIPT.exists() and (ROOT / "tests" / "native" / "golden_digest.cpp").exists()):
        pytest.skip("tools/cross_check.sh needs the source tree")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cross toolchain not installed: {', '.join(missing)}")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    return tmp_path, result.returncode, result.stdout + result.stderr


@pytest.mark.slow  # (four builds of the core, seven runs, two under qemu)
def test_every_build_gives_the_same_bytes(tmp_path):
    work, status, output = _cross_check(tmp_path)
    assert status == 0, output
    assert "0 GCC/x86-only constructs left under MSVC's macros" in output
    for run in ("gcc-portable", "gcc-avx2", "clang", "nosimd", "aarch64", "aarch64-portable"):
        assert f"{run}: identical to gcc" in output
    reference = (work / "gcc.txt").read_text().splitlines()
    # Every lattice, mechanism and coder of the core encoded and decoded.
    assert len(reference) == 513 and reference[-1].startswith("total ")
    assert not any("ERROR" in line for line in reference)
    for name in ("gaussian-Z8", "laplace-Z4", "sdq-Z1", "gaussian-A2", "gaussian-D4",
                 "gaussian-E8"):
        for coder in ("golomb", "ans"):
            assert any(line.startswith(f"{name}-{coder}-") for line in reference)
