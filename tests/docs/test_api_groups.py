"""The API reference (docs/_ext/cepam_docs.py): every public name of the
four public modules sits in exactly one group of its page, and every public
function and class that takes arguments says in its docstring what they are
(``Args:``, or a data class's ``Attributes:``) and what it raises
(``Raises:``: every public call checks its arguments; a named tuple checks
nothing, and a call that turns every error into a reply says it "raises
nothing"), and every public function that returns something says what
(``Returns:``)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys

import pytest

from helpers.paths import ROOT


@pytest.fixture(scope="module")
def docs_ext():
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return importlib.import_module("cepam_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def _module(name: str):
    if name == "cepam.accounting":
        pytest.importorskip("scipy")
    if name == "cepam.flower":
        pytest.importorskip("flwr")
    return importlib.import_module(name)


MODULES = ("cepam", "cepam.accounting", "cepam.flower", "cepam.cuda")


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_is_in_one_group(docs_ext, module_name):
    module = _module(module_name)
    assert module_name in docs_ext.API_MODULES
    table = docs_ext.API_GROUPS[module_name]
    placed = [name for members in table.values() for name in members]
    assert sorted(placed) == sorted(set(placed)), "a name in two groups"
    assert set(placed) == set(module.__all__)
    assert "Other" not in docs_ext.group_names(module_name)


def _documented_callables(module_name: str):
    """(qualified name, object) of each public function and class of the
    module."""
    module = _module(module_name)
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        if inspect.isclass(obj) or inspect.isroutine(obj):
            yield f"{module_name}.{name}", obj


def _parameters(obj) -> list[str]:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [p for p in signature.parameters if p not in ("self", "cls")]


def _docstring(obj) -> str:
    text = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and "__init__" in vars(obj):
        text += "\n" + (inspect.getdoc(obj.__init__) or "")
    return text


def _checks_nothing(obj) -> bool:
    """A named tuple, a data class without ``__post_init__`` (a record) or a
    protocol: built without checks, so it raises nothing of its own."""
    if not inspect.isclass(obj):
        return False
    if issubclass(obj, tuple) or getattr(obj, "_is_protocol", False):
        return True
    # (a data class's generated __init__ checks nothing; FLSetting writes its own)
    return (dataclasses.is_dataclass(obj) and obj.__dataclass_params__.init
            and not hasattr(obj, "__post_init__"))


def _returns_something(obj) -> bool:
    if inspect.isclass(obj):
        return False
    annotation = inspect.signature(obj).return_annotation
    return annotation not in (None, "None", inspect.Signature.empty)


@pytest.mark.parametrize("module_name", MODULES)
def test_public_calls_say_args_returns_and_raises(module_name):
    missing = []
    for qualified, obj in _documented_callables(module_name):
        doc = _docstring(obj)
        if _parameters(obj) and not getattr(obj, "_is_protocol", False):
            # A data class's arguments are its attributes; a named tuple checks nothing.
            if "Args:" not in doc and not (inspect.isclass(obj) and "Attributes:" in doc):
                missing.append(f"{qualified}: Args:")
            if "Raises:" not in doc and "raises nothing" not in doc and \
                    not _checks_nothing(obj):
                missing.append(f"{qualified}: Raises:")
        if _returns_something(obj) and "Returns:" not in doc and "Yields:" not in doc:
            missing.append(f"{qualified}: Returns:")
    assert not missing, "\n".join(missing)
