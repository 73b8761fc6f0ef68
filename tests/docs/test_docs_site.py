"""The documentation site (docs/): it builds with warnings as errors, its API
reference holds every public name, and its guides' examples run.

The build needs the ``docs`` extra (Sphinx, furo, MyST; Flower for the
``cepam.flower`` pages); without it those tests skip.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import ROOT

DOCS = ROOT / "docs"
API_MODULES = ("cepam", "cepam.accounting", "cepam.flower", "cepam.cuda")
GUIDES = sorted((DOCS / "guide").glob("*.md"))


def _extension():
    """docs/_ext/cepam_docs.py, the site's Sphinx extension (needs Sphinx)."""
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module("cepam_docs")
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def _code_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"),
                      flags=re.S | re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site: the one at ``CEPAM_DOCS_SITE`` if set (CI builds it
    once, with the same warnings-as-errors command), else built here."""
    for module in ("sphinx", "furo", "myst_parser", "flwr", "scipy"):
        pytest.importorskip(module)
    built = os.environ.get("CEPAM_DOCS_SITE")
    if built:
        assert (Path(built) / "index.html").is_file(), f"no site built at {built}"
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
         str(DOCS), str(out), "-d", str(out / ".doctrees")],
        capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_builds_without_warnings(site: Path) -> None:
    for page in ("index.html", "guide/flower.html", "guide/cli.html", "format.html",
                 "privacy.html", "changelog.html", "api/generated/cepam.Codec.html"):
        assert (site / page).is_file(), page


def test_every_public_name_is_in_the_api_reference(site: Path) -> None:
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    # Sphinx 8.2+ gives items with attributes; older ones plain tuples.
    documented = {name: entry.uri if hasattr(entry, "uri") else entry[2]
                  for objects in inventory.values() for name, entry in objects.items()}
    missing = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        assert module_name in documented
        for name in module.__all__:
            qualified = f"{module_name}.{name}"
            if qualified not in documented:
                missing.append(qualified)
            elif not documented[qualified].startswith(f"api/generated/{qualified}.html"):
                missing.append(f"{qualified} (at {documented[qualified]})")
    assert not missing, missing


def test_the_readme_sections_are_included_not_copied(site: Path) -> None:
    # Text of README's "Choosing sigma and clip" reaches its guide, which
    # includes it rather than holding a copy.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (site / "guide" / "choosing-sigma-and-clip.html").read_text(encoding="utf-8")
    source = (DOCS / "guide" / "choosing-sigma-and-clip.md").read_text(encoding="utf-8")
    assert "## Choosing sigma and clip" in readme
    phrase = "Client-level privacy with few clients drowns the update"
    assert phrase in readme and phrase in page and phrase not in source


def test_every_readme_link_to_a_page_resolves() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+)", readme)
    assert len(links) >= 10
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_cli_page_lists_every_command(site: Path) -> None:
    from cepam import cli

    page = (site / "guide" / "cli.html").read_text(encoding="utf-8")
    commands = [words for words, _ in _extension()._commands(cli.build_parser(), ("cepam",))]
    commands += [("cepam",) + importlib.import_module(name).COMMAND
                 for name in cli._NESTED_MODULES]
    assert {("cepam", "inspect"), ("cepam", "fl", "run"), ("cepam", "privacy", "ledger")
            } <= set(commands)
    for words in commands:
        assert f'id="cli-{"-".join(words)}"' in page, words


def test_sections_are_marked_outside_code_blocks() -> None:
    mark_sections = _extension().mark_sections
    text = ("# Title\n\nintro\n\n## One\n\ntext\n\n### Sub\n\n```python\n## not a heading\n"
            "```\n\n## Two\nend\n")
    assert mark_sections(text) == (
        "# Title\n\nintro\n\n<!-- section: One -->\n\ntext\n\n## Sub\n\n```python\n"
        "## not a heading\n```\n\n<!-- end: One -->\n<!-- section: Two -->\nend\n"
        "<!-- end: Two -->\n")


def test_readme_notes_become_links() -> None:
    link_notes = _extension().link_notes
    text = ("See `docs/privacy.md` and `docs/nope.md`.\n```bash\ncat `docs/format.md`\n```\n"
            "Already [`docs/format.md`](docs/format.md).\n")
    assert link_notes(text) == (
        "See [`docs/privacy.md`](docs/privacy.md) and `docs/nope.md`.\n"
        "```bash\ncat `docs/format.md`\n```\nAlready [`docs/format.md`](docs/format.md).\n")


@pytest.mark.parametrize("page, index", [(p, i) for p in GUIDES
                                         for i in range(len(_code_blocks(p)))],
                         ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_guide_examples_run(page: Path, index: int) -> None:
    # Examples written in the guides themselves; what a guide includes from
    # README.md runs in tests/docs/test_readme.py.
    source = _code_blocks(page)[index]
    if "import torch" in source:
        pytest.importorskip("torch")
    if "cepam.accounting" in source:
        pytest.importorskip("scipy")
    if "cepam.flower" in source:
        pytest.importorskip("flwr")
    if "matplotlib" in source:
        pytest.importorskip("matplotlib")
    exec(compile(source, f"{page.relative_to(ROOT)}[python {index}]", "exec"),
         {"__name__": "__guide__"})
