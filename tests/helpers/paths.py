"""Where the tests find the repository's files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GOLDEN", "ROOT", "TESTS"]

TESTS = Path(__file__).resolve().parents[1]
"""The tests/ folder."""

ROOT = TESTS.parent
"""The repository root (the folder holding tests/; a copy of tests/ run
against an installed wheel finds only what was copied beside it)."""

GOLDEN = TESTS / "golden"
"""The golden payloads and their generator."""
