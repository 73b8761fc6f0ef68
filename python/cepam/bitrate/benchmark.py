"""The bitrate benchmark runner: encodes sources and measures whole payloads.

:func:`run_benchmark` encodes the same source draws with ``cepam.encode`` for
CEPAM on every available lattice and both coders, scalar SDQ at the same noise
variance and Gaussian+SDQ, decodes each payload to check its error, and adds
the computed lines of :mod:`cepam.bitrate.theory` and :mod:`cepam.bitrate.ideal` (the bound and the ideal
rates); :mod:`cepam.bitrate.report` writes the rows out.  Bits per
coordinate; the noise is Gaussian with standard deviation ``sigma``.
"""

from __future__ import annotations

import hashlib
import math
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .._checks import check_positive
from ..errors import CepamError, InvalidArgumentError
from ..lattices import LATTICE_DIMS
from .ideal import ideal_rate, ideal_sdq_rate, spec_ideal_rate
from .theory import (
    DESIGN_MUTUAL_INFORMATION_UNIFORM,
    DESIGN_SCALAR_SDQ_UNIFORM,
    S_OVER_SIGMA,
    SOURCES,
    _check_count,
    _check_source,
    _default_dim,
    mutual_information,
)

__all__ = ["sample_source", "Scheme", "default_schemes", "available_lattices", "run_benchmark",
           "MAX_SEED", "MIN_DRAWS"]

#: The largest seed :func:`run_benchmark` takes (2^62 - 1): the values it
#: derives from the seed (``seed + 7 + k`` for the k-th payload, packed as a
#: signed 64-bit integer into the payload nonce, :func:`_nonce`; the
#: sources' ``seed + 1000 * source + grid point``) then never overflow.
MAX_SEED = 2**62 - 1
#: The fewest Monte Carlo draws of the ideal rates (a standard error needs two).
MIN_DRAWS = 2


def sample_source(source: str, s: float, m: int, seed: int) -> np.ndarray:
    """``m`` i.i.d. float64 draws: N(0, s^2) or U[-s, s] (numpy generator ``seed``).

    Raises:
        InvalidTypeError: a ``source`` that is not a str, an ``s`` that is
            not a real number, or an ``m`` or ``seed`` that is not an int.
        InvalidArgumentError: an unknown source, an ``s`` that is not
            positive and finite, ``m`` < 1 or ``seed`` < 0.
    """
    source = _check_source(source)
    s = check_positive("s", s)
    m = _check_count("m", m)
    seed = _check_count("seed", seed, 0)
    rng = np.random.default_rng(seed)
    if source == "gaussian":
        return rng.normal(0.0, s, size=m)
    return rng.uniform(-s, s, size=m)


@dataclass(frozen=True)
class Scheme:
    """One line of the benchmark.

    kind: ``"bound"`` (I(X; X+Z)), ``"ideal"`` (computed ideal rate),
    ``"spec"`` (the ideal rate tabulated in docs/design.md), ``"cepam"``, ``"sdq"`` or
    ``"gaussian+sdq"`` (measured payloads).
    """

    key: str
    label: str
    kind: str
    lattice: str = "Z"
    dim: int | None = 1
    coder: str = "ans"
    note: str = ""


def available_lattices() -> dict[str, bool]:
    """Which lattices of fixed dimension (A2, D4, E8) and ``auto`` the
    installed codec accepts.

    A lattice counts as available if ``cepam.encode(..., lattice=name)`` (with
    its dimension; no ``dim`` for ``auto``) and ``cepam.decode`` succeed on a
    tiny input, whatever ``cepam.codec.LATTICE_NAMES`` says.
    """
    import cepam

    found: dict[str, bool] = {}
    for name in (*LATTICE_DIMS, "auto"):
        try:
            kwargs: dict[str, Any] = {} if name == "auto" else {"dim": _default_dim(name)}
            p = cepam.encode(np.zeros(16), cepam.Gaussian(sigma=1.0), secret=bytes(32),
                             round=0, client=0, lattice=name, **kwargs)
            cepam.decode(p, secret=bytes(32))
            found[name] = True
        except (CepamError, TypeError, ValueError):
            found[name] = False
    return found


def default_schemes(available: dict[str, bool] | None = None) -> list[Scheme]:
    """The benchmark's lines, in table order."""
    if available is None:
        available = available_lattices()
    schemes = [
        Scheme("mi", "I(X; X+Z) (lower bound)", "bound", "", None, note="Gaussian noise sigma"),
        Scheme("ideal-Z1", "ideal LRSUQ Z (n=1)", "ideal", "Z", 1,
               note="[H(H)+H(M|U,V_H)]/n, true source law, Monte Carlo"),
    ]
    # Z^2, Z^3 and every lattice of the core's table with a fixed dimension,
    # by dimension (Z^n before a lattice of the same n).
    ideal = sorted([("Z", 2), ("Z", 3), *LATTICE_DIMS.items()],
                   key=lambda entry: (entry[1], entry[0] != "Z"))
    schemes += [Scheme(f"ideal-{name}{dim if name == 'Z' else ''}",
                       f"ideal LRSUQ {name}^{dim}" if name == "Z" else f"ideal LRSUQ {name}",
                       "ideal", name, dim) for name, dim in ideal]
    schemes += [
        Scheme("ideal-sdq", "ideal scalar SDQ, same variance", "ideal-sdq", "", None,
               note="H(M|V), step sqrt(12) sigma, true source law"),
        Scheme("sdq", "scalar SDQ, same variance (ans)", "sdq", coder="ans",
               note="SDQ.matching(sigma): step sqrt(12) sigma, uniform error"),
        Scheme("gaussian+sdq", "Gaussian+SDQ (ans)", "gaussian+sdq", coder="ans",
               note="N(0, sigma^2) from the client's generator, then SDQ step sqrt(12) sigma"),
        Scheme("cepam-Z1-ans", "CEPAM Z (n=1), ans", "cepam", "Z", 1, "ans"),
        Scheme("cepam-Z1-golomb", "CEPAM Z (n=1), golomb", "cepam", "Z", 1, "golomb"),
        Scheme("cepam-Z2-ans", "CEPAM Z^2, ans", "cepam", "Z", 2, "ans"),
        Scheme("cepam-Z2-golomb", "CEPAM Z^2, golomb", "cepam", "Z", 2, "golomb"),
        Scheme("cepam-Z3-ans", "CEPAM Z^3, ans", "cepam", "Z", 3, "ans"),
    ]
    for name, dim in LATTICE_DIMS.items():
        schemes.append(Scheme(f"cepam-{name}-ans", f"CEPAM {name}, ans", "cepam", name, dim, "ans",
                              note="" if available.get(name) else "not available"))
    schemes.append(Scheme("cepam-auto-ans", "CEPAM auto, ans", "cepam", "auto", None, "ans",
                          note="" if available.get("auto") else "not available"))
    return schemes


_SECRET = bytes(range(7, 39))  # a fixed benchmark secret (not a real key)


def _nonce(seed: int, round_: int, client: int) -> bytes:
    """The benchmark's fixed 16-byte payload nonce for ``seed`` and the
    context (``round_``, ``client``): the sizes and errors are a function of
    the seed, as in format versions before 8 (bench/padding_cost.py encodes
    the same payloads with it)."""
    return hashlib.sha256(b"cepam.bitrate/nonce" + struct.pack("<qqq", seed, round_, client)
                          ).digest()[:16]


_PAYLOAD_KINDS = ("cepam", "sdq", "gaussian+sdq")


def _row_context(schemes: Sequence[Scheme], key: str, source_index: int, grid_index: int, *,
                 grid_size: int = len(S_OVER_SIGMA), seed: int = 0) -> tuple[int, int, int]:
    """The ``(round, client, seed)`` that :func:`run_benchmark` (sources and
    grid of ``grid_size`` points in its order, every scheme of ``schemes``
    run) passes to :func:`_payload_row` for the payload scheme ``key`` at
    that source and grid point, so that one cell can be encoded again
    exactly (bench/padding_cost.py, the docs' tests)."""
    keys = [s.key for s in schemes]
    payloads = [s.key for s in schemes if s.kind in _PAYLOAD_KINDS and s.note != "not available"]
    point = source_index * grid_size + grid_index
    rows_before = point * len(schemes) + keys.index(key)
    payloads_before = point * len(payloads) + payloads.index(key)
    return grid_index, 100 * source_index + rows_before, seed + 7 + payloads_before


def _payload_row(scheme: Scheme, x: np.ndarray, sigma: float, context: tuple[int, int],
                 seed: int) -> dict[str, Any]:
    import cepam
    from ..baselines import encode_noisy_sdq, noisy_sdq_error_std

    round_, client = context
    nonce = _nonce(seed, round_, client)
    t0 = time.perf_counter()
    if scheme.kind == "cepam":
        kwargs: dict[str, Any] = {"lattice": scheme.lattice, "coder": scheme.coder}
        if scheme.dim is not None:
            kwargs["dim"] = scheme.dim
        payload = cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=_SECRET, round=round_,
                               client=client, nonce=nonce, **kwargs)
        expected = sigma
    elif scheme.kind == "sdq":
        mech = cepam.SDQ.matching(sigma)
        payload = cepam.encode(x, mech, secret=_SECRET, round=round_, client=client,
                               coder=scheme.coder, nonce=nonce)
        expected = mech.std
    elif scheme.kind == "gaussian+sdq":
        step = math.sqrt(12.0) * sigma
        payload = encode_noisy_sdq(x, cepam.Gaussian(sigma=sigma), step=step,
                                   rng=np.random.default_rng(seed), secret=_SECRET,
                                   round=round_, client=client, coder=scheme.coder, nonce=nonce)
        expected = noisy_sdq_error_std(cepam.Gaussian(sigma=sigma), step)
    else:  # pragma: no cover
        raise InvalidArgumentError(f"not a payload scheme: {scheme.kind}")
    seconds = time.perf_counter() - t0
    info = cepam.inspect(payload, secret=_SECRET)
    y = cepam.decode(payload, secret=_SECRET)
    err = np.asarray(y, dtype=np.float64) - x
    return {
        "bits_per_coordinate": info.bits_per_coordinate,
        "header_bits": info.header_bits,
        "body_bits": info.sealed_bits,
        "tag_bits": info.tag_bits,
        "coordinates": info.coordinates,
        "dim": info.dim,
        "lattice": info.lattice,
        "error_std_over_expected": float(err.std() / expected),
        "seconds": seconds,
        "status": "ok",
    }


def run_benchmark(*, m: int = 200_000, grid: Sequence[float] = S_OVER_SIGMA,
                  sources: Sequence[str] = SOURCES, sigma: float = 1.0, seed: int = 0,
                  draws: int = 20000, schemes: Sequence[Scheme] | None = None,
                  log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Runs the bitrate benchmark and returns one dict per (source, s/sigma, scheme).

    Measured schemes encode the same ``m`` source draws (numpy seed
    ``seed + 1000 * source index + grid index``) with ``cepam.encode`` and
    report the whole payload's bits per coordinate (header, body and tag); each
    payload is decoded and ``error_std_over_expected`` (decoded error std over
    the scheme's nominal std) checks it.  Computed lines: the mutual
    information and the ideal rates (``draws`` Monte Carlo draws); the design notes'
    tabulated ideal rates fill in (``kind`` "spec") where no computation is
    available (the uniform source for n > 1).

    Returns:
        Rows with the keys of the CSV (see :func:`cepam.bitrate.report.rows_to_csv`).

    Raises:
        InvalidArgumentError: ``m`` < 1, ``draws`` < :data:`MIN_DRAWS`, a
            ``seed`` outside 0 to :data:`MAX_SEED`, a non-positive ``sigma``
            or grid point, or an unknown source (checked before anything runs).
        InvalidTypeError: a non-integer ``m``, ``draws`` or ``seed``.
    """
    m = _check_count("m", m)
    draws = _check_count("draws", draws, MIN_DRAWS)
    seed = _check_count("seed", seed, 0)
    if seed > MAX_SEED:
        raise InvalidArgumentError(f"seed must be at most {MAX_SEED} (2^62 - 1), got {seed}")
    sigma = check_positive("sigma", sigma)
    for s in grid:
        check_positive("s_over_sigma", s)
    sources = [_check_source(src) for src in sources]
    if schemes is None:
        schemes = default_schemes()
    say = log or (lambda _msg: None)
    rows: list[dict[str, Any]] = []
    context = 0
    for si, source in enumerate(sources):
        for gi, ratio in enumerate(grid):
            s = ratio * sigma
            x = sample_source(source, s, m, seed + 1000 * si + gi)
            t_point = time.perf_counter()
            for scheme in schemes:
                row: dict[str, Any] = {
                    "source": source, "s_over_sigma": float(ratio), "scheme": scheme.key,
                    "label": scheme.label, "kind": scheme.kind, "lattice": scheme.lattice,
                    "dim": scheme.dim, "coder": scheme.coder if scheme.kind not in
                    ("bound", "ideal", "ideal-sdq") else "", "bits_per_coordinate": math.nan,
                    "stderr": math.nan, "spec": math.nan, "header_bits": "", "body_bits": "",
                    "tag_bits": "", "coordinates": "", "error_std_over_expected": math.nan,
                    "seconds": math.nan, "status": "ok", "note": scheme.note,
                }
                t0 = time.perf_counter()
                if scheme.kind == "bound":
                    row["bits_per_coordinate"] = mutual_information(source, ratio)
                    if source == "uniform":
                        row["spec"] = DESIGN_MUTUAL_INFORMATION_UNIFORM.get(float(ratio), math.nan)
                elif scheme.kind == "ideal":
                    spec = spec_ideal_rate(source, ratio, scheme.lattice, scheme.dim)
                    row["spec"] = math.nan if spec is None else spec
                    try:
                        rate, err = ideal_rate(source, ratio, lattice=scheme.lattice,
                                               dim=scheme.dim, draws=draws, seed=seed,
                                               return_error=True)
                        row["bits_per_coordinate"], row["stderr"] = rate, err
                    except InvalidArgumentError:
                        # a case ideal_rate does not compute (uniform source
                        # for n > 1, E8 at low s/sigma): draws and seed were
                        # checked above, so no bad argument ends up here
                        if spec is not None:
                            row["bits_per_coordinate"] = spec
                            row["kind"] = "spec"
                            row["status"] = "spec"
                            row["note"] = "docs/design.md section 4 table (Monte Carlo, +-0.03)"
                        else:
                            row["status"] = "not computed"
                    row["seconds"] = time.perf_counter() - t0
                elif scheme.kind == "ideal-sdq":
                    row["bits_per_coordinate"] = ideal_sdq_rate(source, ratio)
                    if source == "uniform":
                        row["spec"] = DESIGN_SCALAR_SDQ_UNIFORM.get(float(ratio), math.nan)
                    row["seconds"] = time.perf_counter() - t0
                elif scheme.note == "not available":
                    row["status"] = "not available"
                else:
                    try:
                        row.update(_payload_row(scheme, x, sigma, (gi, 100 * si + len(rows)),
                                                seed + 7 + context))
                    except CepamError as exc:
                        row["status"] = f"error: {exc}"
                    context += 1
                rows.append(row)
            say(f"{source:8s} s/sigma={ratio:g}: {len(schemes)} lines in "
                f"{time.perf_counter() - t_point:.1f} s")
    return rows
