"""Where the tests find the repository's files."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["GOLDEN", "ROOT", "TESTS", "load_script"]

TESTS = Path(__file__).resolve().parents[1]
"""The tests/ folder."""

ROOT = TESTS.parent
"""The repository root (the folder holding tests/; a copy of tests/ run
against an installed wheel finds only what was copied beside it)."""

GOLDEN = TESTS / "golden"
"""The golden payloads and their generator."""


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The Python script at ``path`` (a bench/ or examples/ file, not a
    package module) imported as a module named ``name`` (default: its stem)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
