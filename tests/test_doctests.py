"""Docstring examples run as tests."""

import doctest
import importlib
import pkgutil

import pytest

import cepam

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(cepam.__path__, prefix="cepam.")
    if not name.endswith("_core")
)


@pytest.mark.parametrize("name", ["cepam"] + MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional dependency is missing
        pytest.skip(str(exc))
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
