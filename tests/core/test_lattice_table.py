"""The core's tables (lattices: cepam.lattices, read from _core.LATTICES;
mechanisms: _core.MECHANISMS, checked against cepam's mechanism classes;
body coders: _core.CODERS, read by cepam.payload) and the one rule on
combinations (check_combination, and _core.Params, which applies it when
built): the tables agree with the kernels and the Python side, and every
caller (encode, parse_sealed) applies the same rule."""

import itertools
import math
import pickle

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks
from cepam.lattices import LATTICE_CODES, LATTICE_DIMS, LATTICE_TABLE, LATTICES, check_combination
from cepam.mechanisms import MECHANISM_CLASSES, check_core_table, core_params
from cepam.payload import CODERS, pack_sealed, parse_sealed

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


@pytest.mark.parametrize("name", ["Z", "A2", "D4", "E8"])
def test_the_exported_basis_is_the_kernels_lattice(name):
    row = LATTICE_TABLE[name]
    for n in row.dims:
        rows = np.array(row.bases[n]).reshape(n, n)  # rows = basis vectors, lower triangular
        assert np.all(np.triu(rows, 1) == 0.0)
        assert abs(np.linalg.det(rows)) == pytest.approx(row.covolume, rel=1e-14)
        # the kernels' points of integer coordinates m are m @ rows
        m = np.random.default_rng(n).integers(-3, 4, size=(16, n))
        points = hooks.lattice_points(m.astype(np.int64).ravel(), lattice=row.code, n=n)
        np.testing.assert_allclose(points.reshape(16, n), m @ rows, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mechanism,name,n", GRID)
def test_check_combination_is_the_rule(mechanism, name, n):
    if (mechanism, name, n) in EXPECTED:
        check_combination(mechanism=mechanism, lattice=LATTICE_CODES[name], n=n)
        assert mechanism in LATTICE_TABLE[name].mechanisms and n in LATTICE_TABLE[name].dims
    else:
        with pytest.raises(cepam.InvalidArgumentError):
            check_combination(mechanism=mechanism, lattice=LATTICE_CODES[name], n=n)


def test_check_combination_keeps_the_rule_once_combinations_are_taken():
    # Every grid point checked twice (the second time from what was kept),
    # and with numpy ints, which are not kept: the same answers.
    for _ in range(2):
        for mechanism, name, n in GRID:
            for m_code, l_code, dim in [(mechanism, LATTICE_CODES[name], n),
                                        (np.int64(mechanism), LATTICE_CODES[name], np.int32(n))]:
                ok = (mechanism, name, n) in EXPECTED
                if ok:
                    check_combination(mechanism=m_code, lattice=l_code, n=dim)
                else:
                    with pytest.raises(cepam.InvalidArgumentError):
                        check_combination(mechanism=m_code, lattice=l_code, n=dim)


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


@pytest.mark.parametrize("mechanism,name,n", GRID)
def test_params_apply_the_rule_when_built(mechanism, name, n):
    code = LATTICE_CODES[name]
    if (mechanism, name, n) in EXPECTED:
        p = _core.Params(mechanism=mechanism, scale=0.5, lattice=code, n=n)
        assert (p.mechanism, p.scale, p.lattice, p.n) == (mechanism, 0.5, code, n)
    else:
        with pytest.raises(cepam.InvalidArgumentError, match="dimension|Gaussian|lattice"):
            _core.Params(mechanism=mechanism, scale=0.5, lattice=code, n=n)


@pytest.mark.parametrize("scale", [0.0, -1.0, math.inf, math.nan])
def test_params_refuse_a_bad_scale(scale):
    with pytest.raises(cepam.InvalidArgumentError, match="noise scale"):
        _core.Params(mechanism=1, scale=scale, lattice=1, n=1)


def test_params_are_an_immutable_value():
    p = core_params(cepam.Gaussian(sigma=0.25), lattice=LATTICE_CODES["E8"], n=8)
    assert p == _core.Params(mechanism=1, scale=0.25, lattice=4, n=8)
    assert p != _core.Params(mechanism=1, scale=0.5, lattice=4, n=8) and p != (1, 0.25, 4, 8)
    assert hash(p) == hash(_core.Params(mechanism=1, scale=0.25, lattice=4, n=8))
    assert repr(p) == "Params(mechanism=1, scale=0.25, lattice=4, n=8)"
    assert pickle.loads(pickle.dumps(p)) == p
    for field in ("mechanism", "scale", "lattice", "n"):
        with pytest.raises(AttributeError):
            setattr(p, field, 1)
    with pytest.raises(cepam.InvalidArgumentError, match="Gaussian"):
        core_params(cepam.Laplace(b=0.25), lattice=LATTICE_CODES["E8"], n=8)


def test_the_mechanism_table_is_the_mechanism_classes():
    rows = {row["code"]: row for row in _core.MECHANISMS}
    assert {code: row["name"].lower() for code, row in rows.items()} == {
        cls.code: cls.name for cls in MECHANISM_CLASSES}
    # Each row's norm and largest dimension are the rule's: Z^n takes
    # n = 1 .. max_dim, the root lattices only l2 (Gaussian).
    for code, row in rows.items():
        assert row["norm"] in ("l1", "l2")
        check_combination(mechanism=code, lattice=LATTICE_CODES["Z"], n=row["max_dim"])
        with pytest.raises(cepam.InvalidArgumentError):
            check_combination(mechanism=code, lattice=LATTICE_CODES["Z"], n=row["max_dim"] + 1)
        for name in LATTICE_DIMS:
            assert (code in LATTICE_TABLE[name].mechanisms) == (row["norm"] == "l2")


@pytest.mark.parametrize("edit", ["rename", "drop", "add"])
def test_a_mechanism_table_that_disagrees_fails_the_import_check(edit):
    rows = [dict(row) for row in _core.MECHANISMS]
    check_core_table(tuple(rows))
    if edit == "rename":
        rows[0]["name"] = "Gauss"
    elif edit == "drop":
        rows.pop()
    else:
        rows.append({"code": 9, "name": "Cauchy"})
    with pytest.raises(ImportError, match="mechanism table"):
        check_core_table(tuple(rows))


def test_the_coder_table_is_the_payload_coders():
    assert CODERS == {row["code"]: row["name"] for row in _core.CODERS} == {1: "golomb", 2: "ans"}
    x = np.linspace(-1.0, 1.0, 64)
    params = _core.Params(mechanism=1, scale=0.1, lattice=1, n=1)
    for code in CODERS:  # every coder of the table encodes; a code outside it is refused
        assert _core.encode(x, key=bytes(32), params=params, factor=1.0, coder=code)
    for code in (0, max(CODERS) + 1):
        with pytest.raises(cepam.InvalidArgumentError, match="unknown body coder"):
            _core.encode(x, key=bytes(32), params=params, factor=1.0, coder=code)


def test_the_padding_bound_has_a_row_for_every_coder():
    from cepam import padding

    assert set(padding._CODER_SLACK) == set(CODERS.values())
