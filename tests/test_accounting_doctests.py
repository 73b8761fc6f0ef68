"""Every example in the accounting modules' docstrings and in docs/privacy.md runs."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import cepam.accounting

MODULES = sorted(m.name for m in pkgutil.iter_modules(cepam.accounting.__path__,
                                                      "cepam.accounting."))
DOC = Path(__file__).resolve().parents[1] / "docs" / "privacy.md"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", ["cepam.accounting", *MODULES])
def test_module_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS,
                             extraglobs={"FLSetting": cepam.accounting.FLSetting})
    assert result.failed == 0


def test_docs_examples():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0 and result.attempted >= 5


def test_public_api_is_explicit():
    for name in cepam.accounting.__all__:
        assert getattr(cepam.accounting, name) is not None
    for name in MODULES:
        assert isinstance(importlib.import_module(name).__all__, list)
