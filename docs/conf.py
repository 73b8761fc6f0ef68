"""Sphinx configuration of cepam's documentation site.

Build (the ``docs`` extra, and the package itself, installed; torch is not
needed)::

    sphinx-build -W --keep-going -n -b html docs docs/_build/html

The build is offline: no intersphinx inventories are fetched, and
references to other projects' names (numpy, torch, Flower) render as plain
text. References to cepam's own names must resolve (``-n -W``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import cepam  # noqa: E402
from cepam_docs import write_api_pages  # noqa: E402

project = "cepam"
author = "cepam developers"
copyright = "cepam developers"  # noqa: A001 (Sphinx's name)
release = cepam.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "cepam_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# Not pages: the build output, and files the pages include or other tools
# write (the generated bitrate and experiment results are pages where a
# guide lists them).
exclude_patterns = ["_build", "_ext", "experiments/runs", "experiments/flower"]

# MyST: anchors for ## and ### headings (links such as privacy.md#6-calibration),
# $...$ maths as in the docs, and GitHub-style tables.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence"]

# autodoc: signatures from the code, with their type hints (also next to each
# documented parameter),
# members in source order; Google-style docstrings (napoleon).
autodoc_typehints = "both"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True
napoleon_preprocess_types = True

# Offline: no intersphinx. Names of other projects (and of the standard
# library beyond builtins) in signatures cannot resolve without their
# inventories; they are left as text. Anything under cepam must resolve.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|torch|flwr|scipy|dp_accounting|pathlib|os|collections|typing"
               r"|types|enum|dataclasses|argparse|sqlite3|logging|concurrent|threading"
               r"|datetime|decimal|fractions|io)(\..*)?"),
    (r"py:.*", r"(NDArray|ArrayLike|DTypeLike|Path|PathLike|Iterable|Iterator|Mapping"
               r"|Sequence|Callable|Any|Literal|Union|Optional|ndarray|Tensor)"),
]

html_theme = "furo"
html_title = f"cepam {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# The API pages are written from the modules' __all__ at every build.
write_api_pages()
