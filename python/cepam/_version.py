"""cepam's version, read from the installed package's metadata.

``pyproject.toml`` is the single source of the version: an installed cepam
(wheel or editable) reports what its metadata says.  A source tree imported
without being installed reads ``pyproject.toml`` beside the package, and
reports ``0+unknown`` if it cannot.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

__all__ = ["package_version"]


def package_version() -> str:
    """The version of the cepam distribution (a PEP 440 string)."""
    try:
        return metadata.version("cepam")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            text = pyproject.read_text(encoding="utf-8")
        except OSError:
            return "0+unknown"
        found = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
        return found.group(1) if found else "0+unknown"
