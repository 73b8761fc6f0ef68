"""Docstring examples and the examples in docs/*.md run as tests; every
module declares its public names."""

import doctest
import importlib
import importlib.machinery
import importlib.util
import pathlib
import pkgutil

import pytest

import cepam

from helpers.paths import ROOT

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _native(name: str) -> bool:
    """Whether module ``name`` is compiled (``_core``, ``_cuda``,
    ``_cuda_on_host``: no source, no ``__all__``)."""
    origin = importlib.util.find_spec(name).origin or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(cepam.__path__, prefix="cepam.")
    if not name.endswith(".__main__") and not _native(name)
)
DOCS = sorted(p.name for p in (ROOT / "docs").glob("*.md") if ">>>" in p.read_text())


def _has_examples(name: str) -> bool:
    """Whether module ``name``'s source holds a ``>>>`` example (read, not imported)."""
    origin = importlib.util.find_spec(name).origin
    return origin is not None and ">>>" in pathlib.Path(origin).read_text()


EXAMPLES = [name for name in ["cepam"] + MODULES if _has_examples(name)]


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # an optional dependency (torch, scipy) is missing
        pytest.skip(str(exc))


def test_docstring_examples_are_found():
    # A module with examples (as cepam's own) is collected: the filter works.
    assert "cepam" in EXAMPLES and "cepam.baselines" in EXAMPLES


# The examples of the accounting (docstrings and docs/privacy.md) run its
# numerics, which need scipy (cepam[privacy]); imports alone do not.
def _needs_scipy(name: str) -> None:
    if name.startswith("cepam.accounting") or name == "privacy.md":
        pytest.importorskip("scipy", reason="the accounting's examples need scipy")


# Counted secrets and nonces: cepam's own example checks a noise std of 1,000
# values to 10 % (4.4 standard errors), which fresh ones would miss once in
# 100,000 runs.
@pytest.mark.usefixtures("counted_secrets", "counted_nonces")
@pytest.mark.parametrize("name", EXAMPLES)
def test_docstring_examples(name):
    _needs_scipy(name)
    result = doctest.testmod(_import(name), optionflags=FLAGS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("name", DOCS)
def test_docs_examples(name):
    _needs_scipy(name)
    result = doctest.testfile(str(ROOT / "docs" / name), module_relative=False,
                              optionflags=FLAGS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("name", ["cepam"] + MODULES)
def test_public_names_are_explicit(name):
    module = _import(name)
    assert isinstance(module.__all__, (list, tuple))
    for public in module.__all__:
        try:
            getattr(module, public)
        except ImportError as exc:  # a lazy name whose optional dependency is missing
            pytest.skip(str(exc))
        except AttributeError:
            pytest.fail(f"{name}.__all__ names missing {public!r}")
