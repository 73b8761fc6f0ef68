"""cepam.simd_level(): the SIMD level the native kernels chose at run time
(csrc/common/cpu.cpp), capped by CEPAM_SIMD, read in fresh processes since
the level is decided once per process."""

import os
import platform
import subprocess
import sys

import pytest

import cepam
from cepam.runtime import SIMD_KERNELS, SIMD_LEVELS


def _level_in_a_process(cap):
    env = {k: v for k, v in os.environ.items() if k != "CEPAM_SIMD"}
    if cap is not None:
        env["CEPAM_SIMD"] = cap
    run = subprocess.run([sys.executable, "-c", "import cepam; print(cepam.simd_level())"],
                         env=env, capture_output=True, text=True, check=True)
    return run.stdout.strip()


def _slower(a, b):
    """The slower of two levels (SIMD_LEVELS is fastest first)."""
    return max(a, b, key=SIMD_LEVELS.index)


def test_the_level_is_a_known_one_the_build_holds():
    assert cepam.simd_level() in SIMD_LEVELS
    assert cepam.simd_level() in SIMD_KERNELS
    assert set(SIMD_KERNELS) <= set(SIMD_LEVELS) and "portable" in SIMD_KERNELS


@pytest.mark.parametrize("cap", ["portable", "avx2"])
def test_cepam_simd_caps_the_level(cap):
    uncapped = _level_in_a_process(None)
    assert _level_in_a_process(cap) == _slower(uncapped, cap)


def test_an_unknown_cepam_simd_value_caps_nothing():
    # Only "portable" and "avx2" cap; anything else (including "avx512",
    # the top level) leaves the CPU's level.
    assert _level_in_a_process("avx512") == _level_in_a_process(None)


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
                    reason="reads the CPU's flags from Linux's /proc/cpuinfo on x86-64")
def test_the_uncapped_level_is_what_the_cpu_supports():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = next(line for line in f if line.startswith("flags")).split()
    cpu = "avx512" if {"avx2", "avx512f"} <= set(flags) else "avx2" if "avx2" in flags \
        else "portable"
    # A build without SIMD kernels (CEPAM_NO_SIMD) runs the portable ones.
    assert _level_in_a_process(None) == _slower(cpu, SIMD_KERNELS[0])


@pytest.mark.parametrize("cap,shown", [("AVX2", None), ("foo", None), ("avx2", "avx2"),
                                       ("avx512", "avx512")])
def test_cepam_info_says_a_cap_it_does_not_know_is_ignored(cap, shown, monkeypatch):
    """A typo (CEPAM_SIMD=AVX2) caps nothing; cepam info showed it as the cap."""
    from cepam.runtime import describe

    monkeypatch.setenv("CEPAM_SIMD", cap)
    info = describe()
    assert info["simd_cap"] == shown
    assert ("simd_cap_error" in info) == (shown is None)
    if shown is None:
        assert f"CEPAM_SIMD={cap!r}" in info["simd_cap_error"]
        assert "ignored" in info["simd_cap_error"]
