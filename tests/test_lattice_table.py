"""The core's lattice table (cepam.lattices, read from _core.LATTICES) and
the one rule on combinations (check_combination): the table agrees with the
lattices' own kernels, and every caller (encode, parse_sealed) applies the
same rule."""

import itertools
import math

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam.lattices import LATTICE_CODES, LATTICE_DIMS, LATTICE_TABLE, LATTICES, check_combination
from cepam.payload import pack_sealed, parse_sealed

# What the core takes: A2, D4 and E8 in their own dimension and Gaussian
# only; Z^n for n = 1 .. 8; Laplace n <= 4; SDQ n = 1.
EXPECTED = {(1, "Z", n) for n in range(1, 9)} | {(2, "Z", n) for n in range(1, 5)} | {
    (3, "Z", 1), (1, "A2", 2), (1, "D4", 4), (1, "E8", 8)}
GRID = list(itertools.product((1, 2, 3), LATTICE_CODES, range(0, 10)))


def test_the_table_names_every_lattice_once():
    assert LATTICES == {1: "Z", 2: "A2", 3: "D4", 4: "E8"}
    assert LATTICE_DIMS == {"A2": 2, "D4": 4, "E8": 8}
    assert len(_core.LATTICES) == len(LATTICE_TABLE) == 4


@pytest.mark.parametrize("name", ["Z", "A2", "D4", "E8"])
def test_geometry_gives_the_kernels_packing_density(name):
    row = LATTICE_TABLE[name]
    for n in row.dims:
        ball = math.pi ** (n / 2) / math.gamma(n / 2 + 1) * row.packing_radius ** n
        gaussian = _core.Params(mechanism=1, scale=1.0, lattice=row.code, n=n)
        kernel = _core.acceptance_probability(gaussian)  # the l2 density
        assert ball / row.covolume == pytest.approx(kernel, rel=1e-13)


@pytest.mark.parametrize("mechanism,name,n", GRID)
def test_check_combination_is_the_rule(mechanism, name, n):
    if (mechanism, name, n) in EXPECTED:
        check_combination(mechanism=mechanism, lattice=LATTICE_CODES[name], n=n)
        assert mechanism in LATTICE_TABLE[name].mechanisms and n in LATTICE_TABLE[name].dims
    else:
        with pytest.raises(cepam.InvalidArgumentError):
            check_combination(mechanism=mechanism, lattice=LATTICE_CODES[name], n=n)


@pytest.mark.parametrize("mechanism,name,n", [g for g in GRID if 1 <= g[2] <= 8])
def test_parse_sealed_applies_the_rule(mechanism, name, n):
    plain = pack_sealed(LATTICE_CODES[name], n, b"body", 0)
    if (mechanism, name, n) in EXPECTED:
        assert parse_sealed(plain, mechanism).n == n
    else:
        with pytest.raises(cepam.FormatError, match="dimension|Gaussian"):
            parse_sealed(plain, mechanism)


@pytest.mark.parametrize("mechanism", [cepam.Gaussian(sigma=0.1), cepam.Laplace(b=0.1),
                                       cepam.SDQ(step=0.1)])
@pytest.mark.parametrize("name", ["Z", "A2", "D4", "E8"])
def test_encode_applies_the_rule(mechanism, name):
    x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    for n in LATTICE_TABLE[name].dims:
        dim = n if name == "Z" else None
        if (mechanism.code, name, n) in EXPECTED:
            cepam.encode(x, mechanism, secret=bytes(32), round=0, client=0, lattice=name, dim=dim)
        else:
            with pytest.raises(cepam.InvalidArgumentError):
                cepam.encode(x, mechanism, secret=bytes(32), round=0, client=0, lattice=name, dim=dim)
