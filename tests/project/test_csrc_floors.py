"""The floors of the native core: each folder of csrc/ may include its own
headers and those of the folders below it, never those above.

Floors, lowest first (FLOORS): common (CPU detection, errors, SIMD building
blocks, format limits) < random (ChaCha20, deterministic maths) < lattice
(lattices and their kernels) < coding (rANS, source models, point coders) <
lrsuq (the quantizer and its latent samplers) < payload (bodies) < cuda <
python (the bindings).  The check reads every `#include "..."` in csrc/;
it also checks that each include names an existing file and that
CMakeLists.txt lists every source file, so that a moved file cannot leave a
stale path behind.  Skips without the source tree (e.g. against an
installed wheel).
"""

import re

import pytest

from helpers.paths import ROOT

CSRC = ROOT / "csrc"
FLOORS = ("common", "random", "lattice", "coding", "lrsuq", "payload", "cuda", "python")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)

pytestmark = pytest.mark.skipif(not CSRC.is_dir(), reason="needs the source tree (csrc/)")


def upward_includes(includes):
    """The (file, included) pairs, both paths relative to csrc/, whose
    included header lies on a higher floor than the including file."""
    bad = []
    for source, target in includes:
        if FLOORS.index(target.split("/")[0]) > FLOORS.index(source.split("/")[0]):
            bad.append((source, target))
    return bad


def native_includes():
    """Every (file, included) pair of csrc/, paths relative to csrc/."""
    pairs = []
    for path in sorted(CSRC.rglob("*")):
        if path.suffix in (".hpp", ".cpp", ".cu", ".cuh", ".h"):
            source = path.relative_to(CSRC).as_posix()
            pairs.extend((source, target) for target in INCLUDE.findall(path.read_text()))
    return pairs


def test_every_folder_has_a_floor():
    folders = {p.name for p in CSRC.iterdir() if p.is_dir()}
    assert folders == set(FLOORS)


def test_every_include_names_a_header_of_csrc():
    pairs = native_includes()
    assert len(pairs) > 100
    missing = [(s, t) for s, t in pairs if not (CSRC / t).is_file()]
    assert missing == []


def test_no_include_goes_up_a_floor():
    assert upward_includes(native_includes()) == []


def test_the_check_sees_an_upward_include():
    pairs = [("lattice/lattice.hpp", "lrsuq/batch_kernels.hpp"),
             ("coding/conditional_coder.hpp", "lrsuq/quantizer.hpp"),
             ("lrsuq/quantizer.hpp", "lattice/lattice.hpp"),
             ("random/detmath.cpp", "random/detmath.hpp")]
    assert upward_includes(pairs) == pairs[:2]


def test_cmake_lists_every_source_file():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    sources = [p.relative_to(ROOT).as_posix() for p in sorted(CSRC.rglob("*"))
               if p.suffix in (".cpp", ".cu")]
    assert sources and [s for s in sources if s not in cmake] == []
