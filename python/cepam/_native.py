"""The one door to cepam's compiled modules.

``cepam._core`` (csrc/python/bindings.cpp, always built) and ``cepam._cuda``
(csrc/python/cuda_bindings.cpp, built only where a CUDA toolkit was found) are
imported here and nowhere else in the library: every other module takes
:data:`core` or :func:`cuda_module` from this one
(tests/project/test_architecture.py checks it).  The binding's test hooks live in the
submodule ``cepam._core.testing``; the library never uses them.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["core", "cuda_module"]

try:
    from . import _core as core
except ImportError as exc:  # pragma: no cover - a source tree that was never built
    raise ImportError(
        "cepam's native core (cepam._core) is not built or does not load: install cepam "
        "with pip (from a source tree: pip install --no-build-isolation -e .)") from exc


def cuda_module() -> ModuleType | None:
    """The CUDA module ``cepam._cuda``, or None where cepam was built without it
    (or it does not load, e.g. without a CUDA driver library).  Never raises."""
    try:
        from . import _cuda
    except ImportError:
        return None
    return _cuda
