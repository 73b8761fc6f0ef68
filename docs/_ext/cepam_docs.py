"""Sphinx glue for cepam's documentation site (docs/conf.py loads it).

Four jobs, so that the site follows the repository without copies:

* **Sections of Markdown files.** MyST's ``include`` reads a file whole or
  between two marker strings.  When a page includes ``README.md`` or a file
  under ``docs/`` (not ``CHANGELOG.md``, included whole), this extension
  marks every ``## `` section of it with
  ``<!-- section: TITLE -->`` ... ``<!-- end: TITLE -->``, drops the
  section's own heading (the including page has its title) and lifts its
  subsections by one level, so a page includes one section by its title::

      ```{include} ../../README.md
      :start-after: <!-- section: Quickstart (numpy) -->
      :end-before: <!-- end: Quickstart (numpy) -->
      :relative-docs: docs/
      ```

  A section renamed or removed from the file fails the build (MyST: text not
  found), rather than leaving a page silently empty.  In README.md, a code
  span naming a note (```docs/privacy.md```) becomes a link to its page.

* **The API reference.** For each module in :data:`API_MODULES`, one page
  listing every name of the module's ``__all__`` (read when the build
  starts, so names added later appear by themselves) and one page per name
  with its autodoc entry.  Written under ``docs/api/generated/`` (ignored by
  git).

* **The command line.**  ``{cli-help} module:function`` renders the
  ``--help`` of an argparse parser and of each of its sub-commands, one
  section each, exactly as the terminal shows it (help texts are plain
  text, not reStructuredText).

* **Public aliases.**  Type hints name where an object is defined
  (``cepam.mechanisms.Gaussian``); the reference documents it where users
  import it from (``cepam.Gaussian``).  A reference to the defining path of
  a documented object resolves to its public entry; any other unresolved
  reference into cepam stays an error (the build runs with ``-n -W``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.util import logging

__all__ = ["API_GROUPS", "API_MODULES", "CliHelp", "group_names", "link_notes",
           "mark_sections", "public_names", "write_api_pages", "setup"]

logger = logging.getLogger(__name__)

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent

# The modules whose ``__all__`` is the public API, with a line about each.
API_MODULES = {
    "cepam": "The codec: encode and decode, mechanisms, keys, errors.",
    "cepam.accounting": "Privacy accounting: per-round bounds, composition over rounds, "
                        "calibration of sigma, the privacy ledger (needs scipy).",
    "cepam.flower": "cepam on Flower: the client mod and the server strategy "
                    "(needs the flower extra).",
    "cepam.cuda": "Updates held on a GPU: whether the CUDA path runs, and the checks "
                  "that hold its output to the CPU's bytes (needs torch with CUDA to run).",
}

# Each module's public names by group, in the order of its page (as Opacus
# and Flower group theirs).  Every name of a module's ``__all__`` is in
# exactly one group (tests/docs/test_api_groups.py), so a new name must be
# placed here to appear.
API_GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "cepam": {
        "Codec": ("encode", "decode", "inspect", "update_norm", "find_ties", "apply_update",
                  "Codec", "PayloadInfo", "simd_level", "__version__"),
        "Mechanisms": ("Gaussian", "Laplace", "SDQ", "encode_sdq", "encode_noisy_sdq",
                       "encode_gaussian_sdq", "encode_laplace_sdq"),
        "Keys, contexts and the guard": ("new_secret", "Context", "ContextGuard"),
        "Errors": ("CepamError", "InvalidArgumentError", "InvalidTypeError", "FormatError",
                   "AuthenticationError", "ContextReuseError", "EncodingError",
                   "DecodingError", "UnexpectedPayloadError", "PrivacyBudgetError",
                   "DeviceError"),
        "Warnings": ("PrecisionWarning", "NoiseWarning", "PrivacyWarning", "FileSafetyWarning",
                     "RateWarning"),
    },
    "cepam.accounting": {
        "Calibrate and report": ("calibrate_client_sigma", "client_epsilon",
                                 "client_noise_multiplier", "calibrate_sigma",
                                 "epsilon_after_rounds", "delta_after_rounds", "FLSetting",
                                 "sampling_probability", "average_noise",
                                 "noise_drowns_update", "RELATIONS", "SAMPLINGS"),
        "Ledger": ("Ledger", "LedgerEntry"),
        "Analyses": ("Analysis", "RecordLevel", "PaperBound", "TightBound", "ClientLevel",
                     "ANALYSES", "create_analysis"),
        "Rounds and composition": ("ClientLevelRound", "CepamGaussianRound",
                                   "CepamLaplaceRound", "GaussianEvent", "ProfileEvent",
                                   "PrivacyEvent", "PLDAccountant", "PrivacyLossDistribution",
                                   "RoundGuarantee", "DEFAULT_DISCRETIZATION"),
        "Client sampling": ("population", "cohort_cap", "cohort_tail", "topup_noise_std",
                            "subsampled_gaussian_delta"),
        "Low-level bounds": ("gaussian_delta", "gaussian_epsilon", "gaussian_mu",
                             "gaussian_noise_multiplier", "paper_gaussian_delta",
                             "paper_gaussian_epsilon", "paper_gaussian_round",
                             "paper_laplace_round", "tight_gaussian_delta",
                             "tight_gaussian_epsilon", "tight_gaussian_round",
                             "tight_laplace_round", "epsilon_for_delta"),
    },
    "cepam.flower": {
        "Client": ("cepam_mod",),
        "Server": ("CepamStrategy",),
    },
    "cepam.cuda": {
        "Availability": ("is_available", "status", "is_cuda", "parse_device",
                         "decodes_on_device", "DEVICE_DECODE_MIN_COORDINATES",
                         "decodes_body_on_device", "HostCopyWarning"),
        "The device's stage": ("LatticeStage", "DEVICE_BODY_MIN_COORDINATES", "decode_on_device"),
        "Checks against the CPU's bytes": ("SPOT_CHECKS", "spot_indices", "check_stage",
                                           "SEGMENT_COORDINATES", "segment_to_check",
                                           "segment_coordinates", "check_segment",
                                           "check_device_output"),
    },
}

GENERATED = DOCS / "api" / "generated"

_HEADING = re.compile(r"^(#{2,6}) (.*?)\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def mark_sections(text: str) -> str:
    """``text`` (Markdown) with each ``## `` section between markers.

    Each section ``## TITLE`` becomes ``<!-- section: TITLE -->``, its body
    with headings one level higher (``###`` to ``##``), and
    ``<!-- end: TITLE -->``; text before the first section is kept as it
    is.  Lines inside fenced code blocks are never taken for headings.
    """
    out: list[str] = []
    title: str | None = None
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        heading = None if fence is not None or match else _HEADING.match(line)
        if heading and len(heading.group(1)) == 2:
            if title is not None:
                out.append(f"<!-- end: {title} -->")
            title = heading.group(2)
            out.append(f"<!-- section: {title} -->")
            continue
        if heading and title is not None:
            line = f"{heading.group(1)[1:]} {heading.group(2)}"
        out.append(line)
    if title is not None:
        out.append(f"<!-- end: {title} -->")
    return "\n".join(out) + "\n"


_NOTE = re.compile(r"(?<!\[)`(docs/[\w./-]+\.md)`")


def link_notes(text: str) -> str:
    """``text`` (Markdown) with each code span naming a file under ``docs/``
    that exists (```docs/privacy.md```) made a link to it, outside fenced
    code blocks: on the site those are pages."""
    out, fence = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fence = not fence
        elif not fence:
            line = _NOTE.sub(lambda m: f"[`{m.group(1)}`]({m.group(1)})"
                             if (ROOT / m.group(1)).is_file() else m.group(0), line)
        out.append(line)
    return "\n".join(out) + "\n"


def _include_read(app: Sphinx, relative_path: Path, parent_docname: str,
                  content: list[str]) -> None:
    path = (Path(app.srcdir) / relative_path).resolve()
    # README.md and the notes under docs/ are included by section; other
    # files (CHANGELOG.md) whole, headings and all.
    if path == ROOT / "README.md" or (path.suffix == ".md" and DOCS in path.parents):
        content[0] = mark_sections(content[0])
    if path == ROOT / "README.md":
        content[0] = link_notes(content[0])


def public_names(module_name: str) -> list[str]:
    """The names of ``module_name.__all__``, in their order there."""
    return list(importlib.import_module(module_name).__all__)


def group_names(module_name: str) -> dict[str, list[str]]:
    """``module_name``'s public names by :data:`API_GROUPS` group, each in
    the order of the module's ``__all__``; a name in no group goes under
    "Other" (which tests/docs/test_api_groups.py refuses)."""
    names = public_names(module_name)
    table = API_GROUPS.get(module_name, {})
    groups = {title: [name for name in names if name in members]
              for title, members in table.items()}
    placed = {name for members in table.values() for name in members}
    rest = [name for name in names if name not in placed]
    if rest:
        groups["Other"] = rest
    return {title: members for title, members in groups.items() if members}


def _kind(module_name: str, name: str) -> str:
    obj = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj):
        return "function"
    return "data"


_ENTRY = {
    "class": ".. autoclass:: {qualified}\n   :members:\n",
    "exception": ".. autoexception:: {qualified}\n   :members:\n   :show-inheritance:\n",
    "function": ".. autofunction:: {qualified}\n",
    "data": ".. autodata:: {qualified}\n",
}


def _write(path: Path, text: str) -> None:
    # Unchanged files keep their time stamp, so incremental builds stay fast;
    # a changed one is replaced whole, so that two builds at once (the test
    # suite's workers) never read half a file.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        part = path.with_name(f".{path.name}.{os.getpid()}")
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)


def write_api_pages(folder: Path = GENERATED) -> dict[str, list[str]]:
    """Write the API pages into ``folder``; return each module's names.

    One page per module (its docstring, a summary table and a table of
    contents of its names) and one per public name.  Pages of names no
    longer exported are removed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    wanted: set[str] = set()
    modules: dict[str, list[str]] = {}
    for module_name, line in API_MODULES.items():
        names = public_names(module_name)
        modules[module_name] = names
        rule = "=" * len(module_name)
        groups = "".join(
            f".. rubric:: {title}\n\n.. autosummary::\n   :nosignatures:\n\n"
            + "".join(f"   {name}\n" for name in members) + "\n"
            for title, members in group_names(module_name).items())
        toc = "\n".join(f"   {module_name}.{name}" for name in names)
        page = (f"{module_name}\n{rule}\n\n{line}\n\n"
                f".. automodule:: {module_name}\n   :no-members:\n\n"
                f".. currentmodule:: {module_name}\n\n{groups}"
                f".. toctree::\n   :hidden:\n\n{toc}\n")
        _write(folder / f"{module_name}.rst", page)
        wanted.add(f"{module_name}.rst")
        for name in names:
            qualified = f"{module_name}.{name}"
            # The short name as the title keeps the sidebar readable; the
            # entry itself shows the full path.
            title = f"{name}\n{'=' * max(len(name), 4)}\n\n"
            entry = _ENTRY[_kind(module_name, name)].format(qualified=qualified)
            _write(folder / f"{qualified}.rst", title + entry)
            wanted.add(f"{qualified}.rst")
    for stale in folder.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink(missing_ok=True)
    return modules


def _public_aliases() -> tuple[dict[str, str], dict[str, str]]:
    """Defining path (``module.qualname``) -> documented public path, and
    documented public path -> the module that defines the object."""
    aliases: dict[str, str] = {}
    defining: dict[str, str] = {}
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            defined = getattr(obj, "__module__", None)
            qualname = getattr(obj, "__qualname__", None)
            if isinstance(defined, str) and isinstance(qualname, str):
                aliases.setdefault(f"{defined}.{qualname}", f"{module_name}.{name}")
                defining[f"{module_name}.{name}"] = defined
    return aliases, defining


def _missing_reference(app: Sphinx, env: Any, node: nodes.Element,
                       contnode: nodes.Element) -> nodes.Element | None:
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    aliases = app.env.cepam_aliases  # type: ignore[attr-defined]
    public = aliases.get(target)
    if public is None:
        # A member of a documented class, e.g. cepam.codec_object.Codec.encode.
        owner, _, member = target.rpartition(".")
        if owner in aliases:
            public = f"{aliases[owner]}.{member}"
    if public is None:
        return _internal_name(app, node, contnode)
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node.get("refdoc", ""), app.builder, node["reftype"],
                               public, node, contnode)


def _lookup(path: str) -> bool:
    """Whether ``path`` (``cepam.x.y``) names a module or an attribute."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return True
    return False


def _internal_name(app: Sphinx, node: nodes.Element,
                   contnode: nodes.Element) -> nodes.Element | None:
    """``contnode`` unlinked when the reference names an existing cepam object
    outside the public API (a submodule, a constant); None (a warning) when
    it names nothing.

    A docstring's ``:data:`EPSILON_CAP``` or ``:mod:`.paper``` is looked
    up where it is written: in the documented module (and class), and in
    the module that defines the object whose page it is on.
    """
    target = node.get("reftarget", "").lstrip(".~")
    module, cls = node.get("py:module"), node.get("py:class")
    scopes = [module, f"{module}.{cls}" if module and cls else None]
    page = node.get("refdoc", "").rpartition("/")[2]
    defining = app.env.cepam_defining.get(page)  # type: ignore[attr-defined]
    scopes += [defining, f"{defining}.{cls}" if defining and cls else None]
    candidates = [target] + [f"{scope}.{target}" for scope in scopes if scope]
    if any(c.startswith("cepam") and _lookup(c) for c in candidates):
        return contnode
    return None


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...]
              ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` and its sub-commands, depth first, with the words that name them."""
    found = [(words, parser)]
    for action in parser._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser
                    seen.add(id(sub))
                    found += _commands(sub, words + (name,))
    return found


class CliHelp(Directive):
    """``{cli-help} module:function``: the ``--help`` of the parser that
    ``function()`` returns and of each sub-command, 88 columns wide."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module_name, _, function = self.arguments[0].partition(":")
        parser = getattr(importlib.import_module(module_name), function)()
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "88"
        try:
            commands = _commands(parser, (parser.prog,))
            out: list[nodes.Node] = []
            for words, sub in commands:
                title = " ".join(words)
                section = nodes.section(ids=[nodes.make_id("cli " + title)])
                section += nodes.title(title, "", nodes.literal(title, title))
                text = sub.format_help()
                section += nodes.literal_block(text, text, language="text")
                out.append(section)
            return out
        finally:
            if columns is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = columns


def _attribute_doc(module_name: str, name: str) -> list[str]:
    """The ``#:`` comment of ``module_name.name`` where the package defines it:
    the module itself or, for a lazily exported name, one of its submodules,
    or, for a name a module re-exports, the loaded sibling it comes from
    (``cepam.cuda``'s ``SPOT_CHECKS``, defined in ``cepam.cuda_checks``)."""
    import sys

    from sphinx.pycode import ModuleAnalyzer

    module = importlib.import_module(module_name)
    value = getattr(module, name)
    candidates = [module_name]
    if hasattr(module, "__path__"):
        import pkgutil

        candidates += [info.name for info in pkgutil.iter_modules(module.__path__,
                                                                   f"{module_name}.")]
    else:
        package = module_name.rpartition(".")[0]
        candidates += sorted(other for other, loaded in list(sys.modules.items())
                             if other.startswith(f"{package}.") and other != module_name
                             and getattr(loaded, name, None) is value)
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # noqa: BLE001 - a native or unreadable module has no comments
            continue
        if ("", name) in docs and getattr(importlib.import_module(candidate), name,
                                          None) is value:
            return list(docs[("", name)])
    return []


def _data_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                    lines: list[str]) -> None:
    """A public constant's ``#:`` comment instead of its type's docstring
    (``float``'s, ``str``'s) when autodoc reads it through a lazy export."""
    module_name, _, attribute = name.rpartition(".")
    if what != "data" or module_name not in API_MODULES:
        return
    if obj.__doc__ == type(obj).__doc__ or not lines:
        lines[:] = _attribute_doc(module_name, attribute)


def _builder_inited(app: Sphinx) -> None:
    aliases, defining = _public_aliases()
    app.env.cepam_aliases = aliases  # type: ignore[attr-defined]
    app.env.cepam_defining = defining  # type: ignore[attr-defined]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the include filter and the alias resolver with Sphinx."""
    app.add_directive("cli-help", CliHelp)
    app.connect("include-read", _include_read)
    app.connect("builder-inited", _builder_inited)
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-process-docstring", _data_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
