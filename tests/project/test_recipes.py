"""README's recipes for adding a lattice, a mechanism or a body coder
("Adding a lattice, a mechanism or a body coder means editing these
files"), checked against the code: every file they name exists, every name
given in parentheses after a file is in that file, the counts of files they
state are the files they list, and each table they name (the lattice,
mechanism and body-coder tables of csrc/) has one row per lattice,
mechanism and coder that Python sees.  The compile-time half (a type
without its row, a latent needing more words than the device code's array
holds) is the static_asserts of csrc/lattice/registry.hpp,
csrc/lrsuq/latent.hpp and csrc/lrsuq/subvector.hpp.  Skips without the
source tree (e.g. against an installed wheel).
"""

from __future__ import annotations

import re

import pytest

from helpers.paths import ROOT

README = ROOT / "README.md"
CSRC = ROOT / "csrc"

pytestmark = pytest.mark.skipif(not CSRC.is_dir() or not README.is_file(),
                                reason="needs the source tree (csrc/, README.md)")

FILE = re.compile(r"`((?:csrc|python)/[\w/<>.-]+\.(?:hpp|cpp|py)|CMakeLists\.txt)`")
NAME = re.compile(r"`([A-Za-z_][\w:.]*)`")
# The coders whose files stand for <name> in the body coder's recipe.
CODER_FILES = ("golomb", "ans")


def recipes() -> dict[str, str]:
    """README's recipes by their bold title: "Lattice", "Mechanism",
    "Body coder" -> the bullet's text."""
    text = README.read_text()
    start = text.index("Adding a lattice, a mechanism or a body coder")
    section = text[start:text.index("\n## ", start)]
    bullets = re.findall(r"^- \*\*([\w ]+)\*\* (.*?)(?=^- \*\*|\Z)", section, re.M | re.S)
    return {title: " ".join(body.split()) for title, body in bullets}


def files_in(text: str) -> list[str]:
    """The files a piece of a recipe names, in order, each once."""
    return list(dict.fromkeys(FILE.findall(text)))


def instances(path: str) -> list[str]:
    """The repository paths a recipe's path stands for (<name>: each coder's)."""
    if "<name>" in path:
        return [path.replace("<name>", coder) for coder in CODER_FILES]
    return [path]


def parenthetical(text: str, at: int) -> str:
    """The balanced parenthetical starting at text[at] ("(" after spaces),
    or "" if none starts there."""
    rest = text[at:].lstrip()
    if not rest.startswith("("):
        return ""
    depth = 0
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return rest[1:i]
    return rest


def test_the_recipes_are_there():
    assert set(recipes()) == {"Lattice", "Mechanism", "Body coder"}


def test_every_file_a_recipe_names_exists():
    missing = [p for body in recipes().values() for f in files_in(body) for p in instances(f)
               if not (ROOT / p).is_file()]
    assert not missing, missing


def test_every_name_given_for_a_file_is_in_it():
    """`path` (... `Name` ...): Name occurs in the file, as a whole word
    (its last component for a qualified or dotted name)."""
    missing = []
    for title, body in recipes().items():
        for match in FILE.finditer(body):
            names = NAME.findall(parenthetical(body, match.end()))
            for path in instances(match.group(1)):
                source = (ROOT / path).read_text()
                for name in names:
                    word = re.split(r"::|\.", name)[-1]
                    if not re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", source):
                        missing.append(f"{title}: {name} in {path}")
    assert not missing, missing


def _stated(body: str, pattern: str) -> int:
    return int(re.search(pattern, body).group(1))


def test_the_counts_of_files_are_the_files_listed():
    r = recipes()
    lattice = r["Lattice"].split("Optional")[0]
    assert len(files_in(lattice)) == _stated(r["Lattice"], r"^\((\d+) files")
    required, then = r["Mechanism"].split("Then,")
    assert len(files_in(required)) == _stated(r["Mechanism"], r"^\((\d+) files")
    assert len(files_in(then)) == _stated(r["Mechanism"], r"(\d+) more with privacy")
    coder = r["Body coder"]
    new = [f for f in files_in(coder) if "<name>" in f]
    assert len(new) == _stated(coder, r"^\((\d+) new files")
    edits = coder.split("to edit):")[1].split("Its type")[0]
    assert len(files_in(edits)) == _stated(coder, r"(\d+) to edit")


def _rows(path: str, pattern: str) -> list[str]:
    return re.findall(pattern, (CSRC / path).read_text())


def _type_list(path: str, alias: str) -> list[str]:
    """The types of `using alias = List<A, B, ...>;` in csrc/path."""
    body = re.search(rf"using {alias} = \w+<([^>]*)>;", (CSRC / path).read_text()).group(1)
    return [t.strip() for t in body.split(",")]


def test_the_lattice_table_has_a_row_per_lattice_python_sees():
    from cepam import _core

    rows = _rows("lattice/registry.hpp", r'\{LatticeId::(\w+), "(\w+)", (\d+),')
    python = sorted(_core.LATTICES, key=lambda r: r["code"])
    assert [name for _, name, _ in rows] == [r["name"] for r in python]
    # dimension 0: Z^n, every n of the core; else the lattice's one dimension
    assert [len(r["dims"]) > 1 if dim == "0" else r["dims"] == (int(dim),)
            for (_, _, dim), r in zip(rows, python)] == [True] * len(rows)
    roots = _type_list("lattice/registry.hpp", "RootLattices")
    assert len(roots) == sum(1 for _, _, dim in rows if dim != "0")
    source = (CSRC / "lattice/root_lattices.hpp").read_text()
    for t in roots:  # each root type is defined with its table id
        body = source[source.index(f"struct {t} "):]
        assert re.search(r"static constexpr LatticeId id = LatticeId::(\w+);", body)


def test_the_mechanism_table_has_a_row_per_mechanism_python_sees():
    from cepam import _core
    from cepam.mechanisms import MECHANISM_CLASSES

    rows = _rows("lrsuq/latent.hpp", r'\{MechanismId::(\w+), "(\w+)",')
    python = sorted(_core.MECHANISMS, key=lambda r: r["code"])
    assert [name for _, name in rows] == [r["name"] for r in python]
    assert [cls.code for cls in MECHANISM_CLASSES] == [r["code"] for r in python]
    assert len(_type_list("lrsuq/latent.hpp", "Latents")) == len(rows)
    # One name for SDQ: the id, the row and the latent type say SDQ.
    assert ("SDQ", "SDQ") in rows and "SdqLatent" in _type_list("lrsuq/latent.hpp", "Latents")


def test_the_coder_table_has_a_row_per_coder_python_sees_with_its_paths():
    from cepam import _core
    from cepam import padding

    types = _type_list("payload/body.cpp", "BodyCoders")
    assert len(types) == len(_core.CODERS)
    cmake = (ROOT / "CMakeLists.txt").read_text()
    bindings = (CSRC / "python/cuda_bindings.cpp").read_text()
    for t, row in zip(types, sorted(_core.CODERS, key=lambda r: r["code"])):
        header = CSRC / f"payload/{row['name']}_body.hpp"
        declared = header.read_text()
        assert f"struct {t} {{" in declared
        assert f'name = "{row["name"]}"' in declared
        assert row["cpu"] == f"csrc/payload/{row['name']}_body.cpp"
        assert row["cpu"] in cmake
        assert f"{t}::encode(" in (ROOT / row["cpu"]).read_text()  # its loops beside its format
        for path in ("device_encode", "device_decode"):
            assert f'{path} = "{row[path]}"' in declared
            assert f"m.def({t}::{path}," in bindings  # registered under the row's name
    assert set(padding._CODER_SLACK) == {row["name"] for row in _core.CODERS}


def test_the_gpu_routes_bodies_through_the_coder_table():
    """cepam/cuda*.py and encoding.py's _gpu_body pick a coder's kernels from
    its row, never by the coder's name."""
    cuda = "".join(p.read_text() for p in sorted((ROOT / "python/cepam").glob("cuda*.py")))
    encoding = (ROOT / "python/cepam/encoding.py").read_text()
    gpu_body = encoding[encoding.index("def _gpu_body("):]
    gpu_body = gpu_body[:gpu_body.index("\ndef ")]
    for code in (cuda, gpu_body):
        assert not re.search(r"cuda_module\(\)\.(en|de)code_\w+_body_resident", code)
        assert 'CODER_CODES["' not in code and "_coder_code(" not in code
    assert 'row["device_encode"]' in cuda and '["device_decode"]' in cuda


def test_the_core_dispatches_without_a_switch_on_ids():
    """Lattices, mechanisms and coders are chosen by folds over their type
    lists (with_root_lattice, with_latent_type, with_body_coder), not by a
    switch on their ids."""
    cases = re.compile(r"case (LatticeId|MechanismId|Coder)::")
    found = [str(p.relative_to(ROOT)) for p in CSRC.rglob("*.[ch]pp") if cases.search(p.read_text())]
    assert not found, found
