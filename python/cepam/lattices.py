"""The core's lattice table, read once from the native module.

Each lattice is written once, in C++ (``csrc/lattice/registry.hpp``); the
binding exports it as ``_core.LATTICES`` and this module gives the Python
side its views: payload codes and names, the dimensions each lattice takes,
and its geometry.  The rule on which mechanism a lattice takes in which
dimension lives in the core too (``check_combination``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._native import core as _core

__all__ = ["LatticeRow", "LATTICE_TABLE", "LATTICES", "LATTICE_CODES", "LATTICE_NAMES",
           "LATTICE_DIMS", "check_combination"]


@dataclass(frozen=True)
class LatticeRow:
    """One lattice of the core: payload ``code``, ``name``, the sub-vector
    dimensions ``dims`` it takes, the mechanism ``mechanisms`` codes it takes,
    and its geometry in the coordinates of the core's kernels: its basis in
    each dimension it takes (``bases[n]``: ``n * n`` values, row ``i`` basis
    vector ``i``, lower triangular), the l2 ``packing_radius``, the ``covolume`` (volume of a cell) and the length
    ``dual_minimum`` of the shortest non-zero vector of the dual lattice."""

    code: int
    name: str
    dims: tuple[int, ...]
    mechanisms: tuple[int, ...]
    bases: dict[int, tuple[float, ...]]
    packing_radius: float
    covolume: float
    dual_minimum: float


#: Every lattice of the core, by name, in code order.
LATTICE_TABLE: dict[str, LatticeRow] = {
    row["name"]: LatticeRow(**row) for row in sorted(_core.LATTICES, key=lambda r: r["code"])
}
#: Payload code -> name.
LATTICES: dict[int, str] = {row.code: name for name, row in LATTICE_TABLE.items()}
#: Name -> payload code.
LATTICE_CODES: dict[str, int] = {name: row.code for name, row in LATTICE_TABLE.items()}
#: The names a ``lattice=`` argument takes (besides "auto"), in code order.
LATTICE_NAMES: tuple[str, ...] = tuple(LATTICE_CODES)
#: The fixed dimension of each lattice that has one (all but Z^n).
LATTICE_DIMS: dict[str, int] = {
    name: row.dims[0] for name, row in LATTICE_TABLE.items() if len(row.dims) == 1
}


def check_combination(*, mechanism: int, lattice: int, n: int) -> None:
    """Raises :class:`cepam.errors.InvalidArgumentError` unless the core takes
    the mechanism code on the lattice code in dimension ``n`` (A2, D4 and E8:
    their own dimension and Gaussian only; Laplace ``n <= 4``; SDQ ``n = 1``).
    The combinations of plain ints the core took are kept (a few: a decoder
    checks one on every payload)."""
    plain = type(mechanism) is type(lattice) is type(n) is int  # (only these are hashed)
    if plain and (mechanism, lattice, n) in _TAKEN:
        return
    _core.check_combination(mechanism=mechanism, lattice=lattice, n=n)
    if plain:
        _TAKEN.add((mechanism, lattice, n))


_TAKEN: set[tuple[int, int, int]] = set()
