"""Same bytes on every platform: tools/cross_check.sh builds the native core
with GCC (run at every SIMD level), Clang, CEPAM_NO_SIMD and Debian's aarch64
cross compiler (run under qemu-aarch64), and compares the digests of the
bodies tests/native/golden_digest.cpp encodes; it also checks that the
GCC/x86-only code compiles out under MSVC's macros (tools/msvc_guard_scan.py).

Runs where the cross toolchain is installed (`apt-get install clang
g++-aarch64-linux-gnu qemu-user`; .ci/run installs it) and the source tree
is at hand; skips otherwise (e.g. against an installed wheel).
"""

import shutil
import subprocess

import pytest

from helpers.paths import ROOT

SCRIPT = ROOT / "tools" / "cross_check.sh"
TOOLS = ("cmake", "g++", "clang++", "aarch64-linux-gnu-g++", "qemu-aarch64")


@pytest.mark.slow  # (five builds of the core, one run under qemu)
def test_every_build_gives_the_same_bytes(tmp_path):
    if not (SCRIPT.exists() and (ROOT / "tests" / "native" / "golden_digest.cpp").exists()):
        pytest.skip("tools/cross_check.sh needs the source tree")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cross toolchain not installed: {', '.join(missing)}")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 GCC/x86-only constructs left under MSVC's macros" in result.stdout
    for run in ("gcc-portable", "gcc-avx2", "clang", "nosimd", "aarch64"):
        assert f"{run}: identical to gcc" in result.stdout
    reference = (tmp_path / "gcc.txt").read_text().splitlines()
    # Every lattice, mechanism and coder of the core encoded and decoded.
    assert len(reference) == 513 and reference[-1].startswith("total ")
    assert not any("ERROR" in line for line in reference)
    for name in ("gaussian-Z8", "laplace-Z4", "sdq-Z1", "gaussian-A2", "gaussian-D4",
                 "gaussian-E8"):
        for coder in ("golomb", "ans"):
            assert any(line.startswith(f"{name}-{coder}-") for line in reference)
