"""What this process's native core runs: its SIMD level, threads and GPU path.

The native kernels come in a portable form and, on x86-64 builds with GCC
or Clang, AVX2 and AVX-512 forms, chosen once per process at run time from
what the CPU and operating system support; on aarch64 builds with GCC or
Clang, NEON forms (always there: NEON is part of the architecture).  Every
level gives the same bytes; only the speed differs.  The environment variable ``CEPAM_SIMD``
(``"portable"`` or ``"avx2"``), set before cepam's first encode or decode,
caps the level; it never raises it above what the CPU has.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import numpy as np

from ._native import core as _core
from ._version import package_version
from .cuda import status as cuda_status
from .errors import CepamError
from .threads import resolve_threads

__all__ = ["SIMD_LEVELS", "SIMD_KERNELS", "SIMD_ENV", "simd_level", "describe"]

#: The SIMD levels of the native kernels, fastest first.
SIMD_LEVELS: tuple[str, ...] = ("avx512", "avx2", "neon", "portable")

#: The levels this build holds kernels for, fastest first:
#: ``("avx512", "avx2", "portable")`` on x86-64 with GCC or Clang,
#: ``("neon", "portable")`` on aarch64 with GCC or Clang (Linux, Apple
#: silicon), else ``("portable",)`` (MSVC, builds with ``CEPAM_NO_SIMD``).
SIMD_KERNELS: tuple[str, ...] = tuple(str(level) for level in _core.SIMD_KERNELS)

#: The environment variable that caps the SIMD level (read once per process).
SIMD_ENV = "CEPAM_SIMD"


def simd_level() -> str:
    """The SIMD level cepam's native kernels run at in this process.

    Returns:
        One of :data:`SIMD_LEVELS`: ``"avx512"`` (AVX-512F kernels, x86-64),
        ``"avx2"``, ``"neon"`` (aarch64: Linux, Apple silicon) or
        ``"portable"`` (C++ over 128-bit vectors with GCC and Clang, scalar
        otherwise: MSVC builds, builds with ``CEPAM_NO_SIMD``, x86-64 CPUs
        without AVX2).  It is decided once per process, at the first call
        that needs it: the highest level the CPU supports, capped by
        ``CEPAM_SIMD`` (``"portable"`` or ``"avx2"``) when that was set
        before.  It raises nothing.
    """
    return str(_core.simd_level())


def describe() -> dict[str, Any]:
    """What cepam runs here, as printed by ``cepam info``.

    Returns:
        A dict: ``version`` (cepam's), ``python``, ``numpy``, ``machine``
        (the processor architecture, e.g. ``"x86_64"``), ``simd`` (see
        :func:`simd_level`), ``simd_kernels`` (:data:`SIMD_KERNELS`, space
        separated), ``simd_cap`` (the value of ``CEPAM_SIMD``, or None when
        unset or not one of :data:`SIMD_LEVELS`, which then caps nothing and
        ``simd_cap_error`` says so), ``threads`` (the native threads an encode or
        decode uses by default: ``CEPAM_THREADS``, else the cores this
        process may run on; None, with ``threads_error`` saying why, when
        ``CEPAM_THREADS`` is invalid), ``cuda`` (whether the CUDA path can
        run) and ``cuda_status`` (why not; ``""`` when it can).  It raises
        nothing: a bad ``CEPAM_THREADS`` or a missing CUDA module or driver
        is reported in the dict.
    """
    try:
        threads: int | None = resolve_threads(None)
        threads_error = ""
    except CepamError as exc:
        threads, threads_error = None, str(exc)
    cuda_ok, cuda_why = cuda_status()
    cap = os.environ.get(SIMD_ENV)
    cap_error = ""
    if cap is not None and cap not in SIMD_LEVELS:  # (the core reads "portable" and "avx2")
        cap_error = (f"{SIMD_ENV}={cap!r} is not one of {', '.join(SIMD_LEVELS)}: ignored, "
                     "nothing is capped")
        cap = None
    found: dict[str, Any] = {
        "version": package_version(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine() or sys.platform,
        "simd": simd_level(),
        "simd_kernels": " ".join(SIMD_KERNELS),
        "simd_cap": cap,
        "threads": threads,
        "cuda": cuda_ok,
        "cuda_status": cuda_why,
    }
    if cap_error:
        found["simd_cap_error"] = cap_error
    if threads_error:
        found["threads_error"] = threads_error
    return found
