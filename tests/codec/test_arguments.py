"""Bad arguments raise clear, specific errors.

Every error is a ``cepam.CepamError`` subclass *and* a ``ValueError`` (bad value)
or ``TypeError`` (bad type), and its message names the offending argument.
"""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import pytest

import cepam

SECRET = bytes(range(50, 82))
X = np.linspace(-0.5, 0.5, 12, dtype=np.float32)
G = cepam.Gaussian(sigma=0.1)
U64 = 1 << 64


def enc(x=X, mechanism=G, **kw):
    args = dict(secret=SECRET, round=0, client=0)
    args.update(kw)
    return cepam.encode(x, mechanism, **args)


def check(call, cls, base, match):
    """call() raises cls (a CepamError, and a `base`), with a message matching `match`."""
    assert issubclass(cls, cepam.CepamError) and issubclass(cls, base)
    with pytest.raises(cls, match=match) as info:
        call()
    assert isinstance(info.value, cepam.CepamError)
    assert isinstance(info.value, base)
    return info.value


VALUE, TYPE = ValueError, TypeError
IA, IT = cepam.InvalidArgumentError, cepam.InvalidTypeError


def _nan_at(index, dtype=np.float32, value=math.nan):
    x = np.ones(10, dtype)
    x[index] = value
    return x


# (id, callable, error class, built-in base, message regex)
CASES = [
    # Noise scales.
    *[(f"sigma={v!r}", (lambda v: lambda: cepam.Gaussian(sigma=v))(v), IA, VALUE, r"sigma")
      for v in (0, 0.0, -0.0, -1e-3, -math.inf, math.inf, math.nan)],
    *[(f"b={v!r}", (lambda v: lambda: cepam.Laplace(b=v))(v), IA, VALUE, r"\bb must")
      for v in (0, -1, math.inf, math.nan)],
    *[(f"sigma-type-{type(v).__name__}-{v!r}", (lambda v: lambda: cepam.Gaussian(sigma=v))(v),
       IT, TYPE, r"sigma") for v in ("0.1", None, True, False, [0.1], 1j)],
    *[(f"b-type-{type(v).__name__}", (lambda v: lambda: cepam.Laplace(b=v))(v), IT, TYPE,
       r"\bb must") for v in ("1", None, True)],
    # The mechanism argument itself.
    *[(f"mechanism-{name}", (lambda v: lambda: enc(mechanism=v))(v), IT, TYPE, r"mechanism")
      for name, v in (("str", "gaussian"), ("None", None), ("float", 0.1),
                      ("class", cepam.Gaussian))],
    # NaN / Inf in x.
    ("x-nan-f32-first", lambda: enc(_nan_at(0)), IA, VALUE, r"non-finite|NaN"),
    ("x-nan-f32-last", lambda: enc(_nan_at(9)), IA, VALUE, r"non-finite|NaN"),
    ("x-inf-f64", lambda: enc(_nan_at(3, np.float64, math.inf)), IA, VALUE, r"non-finite|Inf"),
    ("x-neg-inf-f64", lambda: enc(_nan_at(5, np.float64, -math.inf)), IA, VALUE,
     r"non-finite|Inf"),
    ("x-nan-f16", lambda: enc(_nan_at(2, np.float16)), IA, VALUE, r"non-finite|NaN"),
    ("x-inf-f16", lambda: enc(_nan_at(2, np.float16, math.inf)), IA, VALUE, r"non-finite|Inf"),
    ("x-nan-2d", lambda: enc(np.where(np.eye(4) > 0, np.nan, 0.5)), IA, VALUE,
     r"non-finite|NaN"),
    ("x-nan-0d", lambda: enc(np.float32(math.nan)), IA, VALUE, r"non-finite|NaN"),
    ("x-nan-with-clip", lambda: enc(_nan_at(4), clip=1.0), IA, VALUE, r"non-finite|NaN"),
    ("x-nan-with-huge-finite", lambda: enc(np.array([1e308, 1e308, math.nan])), IA, VALUE,
     r"non-finite|NaN"),
    ("x-nan-in-one-dict-entry",
     lambda: enc({"w": np.ones((2, 3), np.float32), "b": _nan_at(7)}), IA, VALUE,
     r"non-finite|NaN"),
    ("x-inf-in-one-list-entry", lambda: enc([np.ones(3), _nan_at(0, np.float64, math.inf)]),
     IA, VALUE, r"non-finite|Inf"),
    ("x-too-large-for-noise", lambda: enc(np.array([1e12, 0.0]), cepam.Gaussian(sigma=1e-6)),
     cepam.EncodingError, VALUE, r"too large"),
    # dim (the sub-vector dimension n).
    *[(f"dim={v!r}", (lambda v: lambda: enc(dim=v))(v), IA, VALUE, r"dim")
      for v in (0, 9, -1, 255, 2**70)],
    *[(f"dim-type-{type(v).__name__}-{v!r}", (lambda v: lambda: enc(dim=v))(v), IT, TYPE,
       r"dim") for v in (2.5, 2.0, "2")],
    *[(f"laplace-dim={v}", (lambda v: lambda: enc(mechanism=cepam.Laplace(b=0.1), dim=v))(v),
       IA, VALUE, r"dim") for v in (5, 6, 8)],
    # lattice.
    *[(f"lattice={v!r}", (lambda v: lambda: enc(lattice=v))(v), IA, VALUE, r"lattice")
      for v in ("E9", "E7", "z", "a2", "")],
    # A2, D4 and E8 have fixed dimensions and take the Gaussian mechanism only.
    *[(f"lattice-{lat}-dim={v}", (lambda lat, v: lambda: enc(lattice=lat, dim=v))(lat, v), IA,
       VALUE, r"dim.*lattice|lattice.*dim") for lat, v in
      (("A2", 1), ("A2", 3), ("D4", 2), ("D4", 8), ("E8", 4), ("E8", 1), ("E8", 9))],
    *[(f"lattice-{lat}-dim-type", (lambda lat: lambda: enc(lattice=lat, dim="8"))(lat), IT,
       TYPE, r"dim") for lat in ("A2", "E8")],
    *[(f"lattice-{lat}-{name}", (lambda lat, mech: lambda: enc(mechanism=mech, lattice=lat))(
        lat, mech), IA, VALUE, r"lattice.*Gaussian")
      for lat in ("A2", "D4", "E8")
      for name, mech in (("laplace", cepam.Laplace(b=0.1)), ("sdq", cepam.SDQ(step=0.1)))],
    *[(f"lattice-type-{v!r}", (lambda v: lambda: enc(lattice=v))(v), IT, TYPE, r"lattice")
      for v in (1, 2.0, b"Z")],
    # secret.
    *[(f"secret-{n}-bytes", (lambda n: lambda: enc(secret=bytes(n)))(n), IA, VALUE,
       r"secret must be 32 bytes") for n in (0, 16, 31, 33, 64)],
    *[(f"secret-type-{type(v).__name__}", (lambda v: lambda: enc(secret=v))(v), IT, TYPE,
       r"secret must be bytes") for v in ("s" * 32, None, 0, list(range(32)))],
    ("decode-secret-31", lambda: cepam.decode(enc(), secret=SECRET[:31]), IA, VALUE,
     r"secret must be 32 bytes"),
    ("decode-secret-str", lambda: cepam.decode(enc(), secret="s" * 32), IT, TYPE,
     r"secret must be bytes"),
    ("codec-secret-33", lambda: cepam.Codec(G, secret=SECRET + b"x"), IA, VALUE,
     r"secret must be 32 bytes"),
    ("codec-secret-str", lambda: cepam.Codec(G, secret="s" * 32), IT, TYPE,
     r"secret must be bytes"),
    # round / client / message.
    *[(f"{name}={v!r}", (lambda name, v: lambda: enc(**{name: v}))(name, v), IA, VALUE,
       rf"{name} must be in \[0, 2\^64\)")
      for name in ("round", "client", "message") for v in (-1, U64, U64 + 1, -(U64))],
    *[(f"{name}-type-{type(v).__name__}-{v!r}",
       (lambda name, v: lambda: enc(**{name: v}))(name, v),
       IT, TYPE, rf"{name} must be an integer")
      for name in ("round", "client", "message") for v in (1.0, 0.5, "1", None)],
    ("codec-client--1", lambda: cepam.Codec(G, secret=SECRET, client=-1), IA, VALUE,
     r"client must be in"),
    ("codec-client-float", lambda: cepam.Codec(G, secret=SECRET, client=1.0), IT, TYPE,
     r"client must be an integer"),
    ("codec-encode-round-2^64",
     lambda: cepam.Codec(G, secret=SECRET).encode(X, round=U64), IA, VALUE, r"round must be in"),
    ("codec-encode-message-float",
     lambda: cepam.Codec(G, secret=SECRET).encode(X, round=0, message=0.0), IT, TYPE,
     r"message must be an integer"),
    # Unsupported dtypes and update types.
    *[(f"dtype-{np.dtype(d).name}", (lambda d: lambda: enc(np.zeros(4, d)))(d), IT, TYPE,
       r"dtype") for d in (np.int32, np.int64, np.uint8, np.complex64, np.complex128,
                           object, bool, np.longdouble, "U3", "datetime64[s]")],
    ("dtype-int32-in-dict-entry",
     lambda: enc({"ok": np.ones(3, np.float32), "bad": np.ones(3, np.int32)},
                 non_float="error"), IT, TYPE, r"'bad'.*dtype|dtype.*'bad'"),
    ("dtype-complex-in-dict-entry-skipped-not",
     lambda: enc({"ok": np.ones(3, np.float32), "bad": np.ones(3, np.complex64)}), IT, TYPE,
     r"'bad'.*dtype|dtype.*'bad'"),
    ("dict-only-integer-entries", lambda: enc({"n": np.ones(3, np.int64)}), IA, VALUE,
     r"no floating-point entry"),
    ("int-in-list-entry", lambda: enc([np.ones(2), np.ones(2, np.int64)]), IT, TYPE,
     r"entry 1.*dtype"),
    ("non_float-bad", lambda: enc(X, non_float="drop"), IA, VALUE, r"non_float"),
    ("codec-non_float-bad", lambda: cepam.Codec(G, secret=SECRET, non_float="drop"), IA,
     VALUE, r"non_float"),
    # a value that is not a str: an array raised numpy's "truth value of an
    # array is ambiguous" ValueError (`in NON_FLOAT_CHOICES`), None was IA
    ("codec-non_float-None", lambda: cepam.Codec(G, secret=SECRET, non_float=None), IT, TYPE,
     r"non_float must be a str"),
    ("non_float-array", lambda: enc(X, non_float=np.array(["skip", "error"])), IT, TYPE,
     r"non_float must be a str"),
    ("decode-dtype-array",
     lambda: cepam.decode(enc(), secret=SECRET, dtype=np.array(["auto", "input"])), IT, TYPE,
     r"dtype must be a str"),
    ("decode-dtype-bad", lambda: cepam.decode(enc(), secret=SECRET, dtype="float16"), IA,
     VALUE, r"dtype must be one of"),
    ("decode-expect_mechanism-str",
     lambda: cepam.decode(enc(), secret=SECRET, expect_mechanism="gaussian"), IT, TYPE,
     r"mechanism"),
    ("decode-expect_clip-0", lambda: cepam.decode(enc(), secret=SECRET, expect_clip=0.0), IA,
     VALUE, r"clip"),
    ("decode-expect_client--1", lambda: cepam.decode(enc(), secret=SECRET, expect_client=-1),
     IA, VALUE, r"client"),
    ("decode-expect_round-float", lambda: cepam.decode(enc(), secret=SECRET, expect_round=1.0),
     IT, TYPE, r"round"),
    ("codec-decode-round-bool", lambda: cepam.Codec(G, secret=SECRET).decode(enc(), round=True),
     IT, TYPE, r"round"),
    ("encode-state-int", lambda: enc(state=3), IT, TYPE, r"state must be a path"),
    ("encode-state-memory", lambda: enc(state=":memory:"), IA, VALUE, r"state must name a file"),
    ("codec-state-missing-dir",
     lambda: cepam.Codec(G, secret=SECRET, state="/nonexistent-dir/x.db"), IA, VALUE,
     r"cannot open state file|state file"),
    ("dtype-complex-in-list-entry", lambda: enc([np.ones(2), np.ones(2, np.complex64)]), IT,
     TYPE, r"entry 1.*dtype"),
    *[(f"update-{name}", (lambda v: lambda: enc(v))(v), IT, TYPE, r"expected a numpy|unsupported")
      for name, v in (("float", 1.0), ("int", 3), ("None", None), ("str", "abc"),
                      ("bytes", b"abc"), ("list-of-floats", [1.0, 2.0]), ("set", {1.0}),
                      ("memoryview", memoryview(b"abcd")))],
    ("nested-dict", lambda: enc({"layer": {"w": np.ones(2)}}), IT, TYPE, r"'layer'"),
    ("nested-list", lambda: enc([[np.ones(2)]]), IT, TYPE, r"entry 0"),
    ("list-in-dict", lambda: enc({"w": [np.ones(2)]}), IT, TYPE, r"'w'"),
    ("dict-in-tuple", lambda: enc((np.ones(2), {"w": np.ones(2)})), IT, TYPE, r"entry 1"),
    ("empty-dict", lambda: enc({}), IA, VALUE, r"empty"),
    ("empty-list", lambda: enc([]), IA, VALUE, r"empty"),
    ("empty-tuple", lambda: enc(()), IA, VALUE, r"empty"),
    *[(f"dict-key-{type(k).__name__}", (lambda k: lambda: enc({k: np.ones(2)}))(k), IT, TYPE,
       r"keys must be str") for k in (1, b"w", None, ("a",))],
    ("dict-name-too-long", lambda: enc({"w" * 1025: np.ones(2)}), IA, VALUE, r"name"),
    ("dict-name-too-long-utf8", lambda: enc({"é" * 513: np.ones(2)}), IA, VALUE, r"name"),
    ("dict-name-lone-surrogate", lambda: enc({"\ud800": np.ones(2)}), IA, VALUE,
     r"name.*UTF-8"),
    ("clip-int-beyond-float64", lambda: enc(clip=10**400), IA, VALUE, r"clip"),
    ("sigma-int-beyond-float64", lambda: cepam.Gaussian(sigma=10**400), IA, VALUE, r"sigma"),
    ("state-nul-byte", lambda: enc(state="/tmp/x\0y"), IA, VALUE, r"state"),
    # The padding bound of a clip beyond float64 in noise stds: OverflowError.
    ("pad-levels-clip-1e308", lambda: enc(clip=1e308, pad="levels"), cepam.EncodingError,
     VALUE, r"pad"),
    # clip.
    *[(f"clip={v!r}", (lambda v: lambda: enc(clip=v))(v), IA, VALUE, r"clip")
      for v in (0, 0.0, -1.0, math.nan, math.inf, -math.inf)],
    *[(f"clip-type-{type(v).__name__}", (lambda v: lambda: enc(clip=v))(v), IT, TYPE, r"clip")
      for v in ("1", True, [1.0], 1j)],
    *[(f"codec-clip={v!r}", (lambda v: lambda: cepam.Codec(G, secret=SECRET, clip=v))(v), IA,
       VALUE, r"clip") for v in (0, -2.0, math.nan, math.inf)],
    # Codec settings.
    ("codec-dim-9", lambda: cepam.Codec(G, secret=SECRET, dim=9), IA, VALUE, r"dim"),
    ("codec-laplace-dim-5", lambda: cepam.Codec(cepam.Laplace(b=1.0), secret=SECRET, dim=5), IA,
     VALUE, r"dim"),
    ("codec-dim-str", lambda: cepam.Codec(G, secret=SECRET, dim="2"), IT, TYPE, r"dim"),
    ("codec-lattice-E9", lambda: cepam.Codec(G, secret=SECRET, lattice="E9"), IA, VALUE,
     r"lattice"),
    ("codec-lattice-D4-dim-2", lambda: cepam.Codec(G, secret=SECRET, lattice="D4", dim=2), IA,
     VALUE, r"dim.*lattice|lattice.*dim"),
    ("codec-lattice-E8-laplace",
     lambda: cepam.Codec(cepam.Laplace(b=1.0), secret=SECRET, lattice="E8"), IA, VALUE,
     r"lattice.*Gaussian"),
    ("codec-mechanism-str", lambda: cepam.Codec("gaussian", secret=SECRET), IT, TYPE,
     r"mechanism"),
    # coder (the body coder).
    *[(f"coder={v!r}", (lambda v: lambda: enc(coder=v))(v), IA, VALUE, r"coder")
      for v in ("ANS", "Golomb", "rans", "huffman", "", "ans ", "golomb\x00")],
    *[(f"coder-type-{type(v).__name__}-{v!r}", (lambda v: lambda: enc(coder=v))(v), IT, TYPE,
       r"coder") for v in (None, 1, 2, True, b"ans", ["ans"], 2.0)],
    *[(f"codec-coder={v!r}", (lambda v: lambda: cepam.Codec(G, secret=SECRET, coder=v))(v),
       IA, VALUE, r"coder") for v in ("ANS", "rans", "")],
    *[(f"codec-coder-type-{v!r}",
       (lambda v: lambda: cepam.Codec(G, secret=SECRET, coder=v))(v), IT, TYPE, r"coder")
      for v in (None, 2, b"golomb")],
    # decode's max_coordinates.
    *[(f"max_coordinates={v!r}",
       (lambda v: lambda: cepam.decode(enc(), secret=SECRET, max_coordinates=v))(v), IA,
       VALUE, r"max_coordinates") for v in (-1, -12, -(2**70))],
    *[(f"max_coordinates-type-{type(v).__name__}-{v!r}",
       (lambda v: lambda: cepam.decode(enc(), secret=SECRET, max_coordinates=v))(v), IT, TYPE,
       r"max_coordinates") for v in (True, False, 1e6, 12.0, math.nan, math.inf, "12",
                                     np.float64(12.0))],
    ("codec-decode-max_coordinates--1",
     lambda: cepam.Codec(G, secret=SECRET).decode(enc(), max_coordinates=-1), IA, VALUE,
     r"max_coordinates"),
    ("codec-decode-max_coordinates-float",
     lambda: cepam.Codec(G, secret=SECRET).decode(enc(), max_coordinates=1e6), IT, TYPE,
     r"max_coordinates"),
    ("codec-decode-max_coordinates-bool",
     lambda: cepam.Codec(G, secret=SECRET).decode(enc(), max_coordinates=True), IT, TYPE,
     r"max_coordinates"),
    # SDQ (the uniform-error baseline): step and dim.
    *[(f"sdq-step={v!r}", (lambda v: lambda: cepam.SDQ(step=v))(v), IA, VALUE, r"step")
      for v in (0, 0.0, -0.0, -1.0, -5e-324, math.nan, math.inf, -math.inf)],
    *[(f"sdq-step-type-{type(v).__name__}-{v!r}", (lambda v: lambda: cepam.SDQ(step=v))(v), IT,
       TYPE, r"step") for v in ("0.1", None, True, np.bool_(True), [0.1], 1j)],
    *[(f"sdq-dim={v}", (lambda v: lambda: enc(mechanism=cepam.SDQ(step=0.1), dim=v))(v), IA,
       VALUE, r"dim") for v in (2, 3, 4, 8)],
    *[(f"sdq-dim-out-of-range={v}",
       (lambda v: lambda: enc(mechanism=cepam.SDQ(step=0.1), dim=v))(v), IA, VALUE, r"dim")
      for v in (0, 9, -1)],
    ("sdq-dim-float", lambda: enc(mechanism=cepam.SDQ(step=0.1), dim=1.0), IT, TYPE, r"dim"),
    *[(f"codec-sdq-dim={v}",
       (lambda v: lambda: cepam.Codec(cepam.SDQ(step=0.1), secret=SECRET, dim=v))(v), IA,
       VALUE, r"dim") for v in (2, 8)],
    *[(f"sdq-matching-std={v!r}", (lambda v: lambda: cepam.SDQ.matching(v))(v), IA, VALUE,
       r"std") for v in (0, -1.0, math.nan, math.inf)],
    *[(f"sdq-matching-std-type-{v!r}", (lambda v: lambda: cepam.SDQ.matching(v))(v), IT, TYPE,
       r"std") for v in ("1", None, True)],
    ("mechanism-sdq-class", lambda: enc(mechanism=cepam.SDQ), IT, TYPE, r"mechanism"),
    # decode's output.
    *[(f"output={v!r}", (lambda v: lambda: cepam.decode(enc(), secret=SECRET, output=v))(v), IA,
       VALUE, r"output") for v in ("cuda", "NUMPY", "", "cpu")],
    ("output=None", lambda: cepam.decode(enc(), secret=SECRET, output=None), IT, TYPE,
     r"output must be a str"),
    ("codec-decode-output-cuda",
     lambda: cepam.Codec(G, secret=SECRET).decode(enc(), output="cuda"), IA, VALUE, r"output"),
]


@pytest.mark.parametrize("call,cls,base,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_argument_raises_a_specific_clear_error(call, cls, base, match):
    check(call, cls, base, match)


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


# --- Boundary values that must be accepted (so the errors above are not too eager). ---


@pytest.mark.parametrize("kw", [
    dict(round=U64 - 1, client=U64 - 1, message=U64 - 1),
    dict(round=np.uint64(U64 - 1), client=np.int64(7), message=np.uint8(3)),
    dict(dim=8), dict(dim=np.int64(3)), dict(dim=None),
    dict(lattice="A2"), dict(lattice="D4", dim=4), dict(lattice="E8", dim=np.int64(8)),
    dict(lattice="E8", dim=None),
    dict(clip=1), dict(clip=1e-300), dict(clip=np.float64(2.0)),
    dict(secret=bytearray(SECRET)), dict(secret=memoryview(SECRET)),
], ids=["context-max", "context-numpy-ints", "dim-8", "dim-numpy-int", "dim-none",
        "lattice-A2", "lattice-D4-dim-4", "lattice-E8-dim-numpy-8", "lattice-E8-dim-none",
        "clip-int",
        "clip-tiny", "clip-np-float64", "secret-bytearray", "secret-memoryview"])
def test_boundary_arguments_are_accepted(kw):
    secret = bytes(kw.get("secret", SECRET))
    y = cepam.decode(enc(**kw), secret=secret)
    assert y.shape == X.shape and y.dtype == X.dtype


@pytest.mark.parametrize("coder", ["ans", "golomb", np.str_("ans")], ids=["ans", "golomb",
                                                                      "np.str_"])
def test_both_coders_are_accepted(coder):
    payload = enc(coder=coder)
    assert cepam.inspect(payload).coder == str(coder)
    assert cepam.decode(payload, secret=SECRET).shape == X.shape
    codec = cepam.Codec(G, secret=SECRET, coder=coder)
    assert cepam.inspect(codec.encode(X, round=0)).coder == str(coder)


def test_the_default_coder_is_ans():
    assert cepam.inspect(enc()).coder == "ans"
    assert cepam.inspect(cepam.Codec(G, secret=SECRET).encode(X, round=0)).coder == "ans"


@pytest.mark.parametrize("limit", [12, 13, 2**28, 2**56, 2**70, np.int64(12), np.uint64(12)],
                         ids=["exact", "one-more", "default", "2^56", "2^70", "np.int64",
                              "np.uint64"])
def test_max_coordinates_at_or_above_the_size_is_accepted(limit):
    payload = enc()  # 12 coordinates
    assert cepam.decode(payload, secret=SECRET, max_coordinates=limit).shape == X.shape
    assert cepam.Codec(G, secret=SECRET, allow_unclipped=True).decode(payload, max_coordinates=limit).shape == X.shape


@pytest.mark.parametrize("limit", [0, 1, 11], ids=["zero", "one", "one-less"])
def test_max_coordinates_below_the_size_refuses_the_payload(limit):
    """A valid limit that the payload exceeds: the payload is refused (FormatError)."""
    with pytest.raises(cepam.FormatError, match="max_coordinates"):
        cepam.decode(enc(), secret=SECRET, max_coordinates=limit)
    with pytest.raises(cepam.FormatError, match="max_coordinates"):
        cepam.Codec(G, secret=SECRET, allow_unclipped=True).decode(enc(), max_coordinates=limit)


@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("step", [0.1, np.float32(0.25), 1, 5e-3])
def test_sdq_scalar_with_both_coders_is_accepted(coder, step):
    mech = cepam.SDQ(step=step)
    payload = enc(mechanism=mech, dim=1, coder=coder, clip=2.0)
    y = cepam.decode(payload, secret=SECRET)
    assert y.shape == X.shape and y.dtype == X.dtype
    clipped = X.astype(np.float64)  # ||X|| < 2: no clipping
    assert np.max(np.abs(y - clipped)) <= mech.step / 2 + 1e-6
    assert cepam.inspect(payload).mechanism == mech
    assert cepam.Codec(mech, secret=SECRET, coder=coder).decode(payload).shape == X.shape


def test_laplace_dim_4_and_tiny_positive_scales_are_accepted():
    for mech in (cepam.Laplace(b=0.1), cepam.Laplace(b=5e-324), cepam.Gaussian(sigma=5e-324),
                 cepam.SDQ(step=5e-324)):
        assert mech.scale > 0
    y = cepam.decode(enc(mechanism=cepam.Laplace(b=0.1), dim=4), secret=SECRET)
    assert y.shape == X.shape


def test_supported_dtypes_and_containers_round_trip():
    update = {"a": np.ones((2, 3), np.float16), "b": np.zeros(4, np.float64),
              "c": np.float32(1.5), "": np.ones((1, 1, 1), np.float32).T}
    y = cepam.decode(enc(update), secret=SECRET)
    assert list(y) == list(update)
    # float16 widens to float32 by default (dtype="auto"); dtype="input" keeps it
    assert [(v.shape, v.dtype) for v in y.values()] == \
        [(np.shape(v), np.promote_types(np.asarray(v).dtype, np.float32))
         for v in update.values()]
    y = cepam.decode(enc(update, round=1), secret=SECRET, dtype="input")
    assert [(v.shape, v.dtype) for v in y.values()] == \
        [(np.shape(v), np.asarray(v).dtype) for v in update.values()]
    big_endian = np.arange(6, dtype=">f8").reshape(2, 3)
    y = cepam.decode(enc(big_endian), secret=SECRET)
    assert y.shape == (2, 3) and y.dtype == np.float64


def test_a_context_subclass_checks_its_fields_too():
    """Context's own __init__ checks its fields; a dataclass subclass's
    generated __init__ does not call it, and its __post_init__ checks them."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Tagged(cepam.Context):
        tag: str = ""

    assert Tagged(1, 2, 3, "x") == Tagged(1, 2, 3, "x") and Tagged(1, 2).message == 0
    with pytest.raises(cepam.InvalidArgumentError, match="round must be in"):
        Tagged(-1, 0)
    with pytest.raises(cepam.InvalidTypeError, match="client must be an integer"):
        Tagged(0, "x")
    assert Tagged(np.int64(5), 0).round == 5 and type(Tagged(np.int64(5), 0).round) is int


@pytest.mark.parametrize("name", ["round", "client", "message"])
def test_context_numbers_reject_bool(name):
    """check_u64 special-cases bool, meaning to reject it (as the noise scales do), but
    True is accepted as 1: round=True is almost certainly a caller's bug."""
    check(lambda: enc(**{name: True}), IT, TYPE, name)


@pytest.mark.parametrize("value", [np.float32(0.25), np.float16(0.25), np.int64(1)],
                         ids=["np.float32", "np.float16", "np.int64"])
def test_numpy_scalar_noise_scales_are_accepted(value):
    """A numpy scalar is a real number ('sigma must be a real number, got float32' is
    wrong); numpy integers are accepted for the context numbers and dim."""
    assert cepam.Gaussian(sigma=value).sigma == float(value)
    assert cepam.Laplace(b=value).b == float(value)


def test_a_zero_dimensional_tensor_or_array_is_its_number():
    """clip=torch.median(norms) (a 0-d tensor) and a 0-d array are their
    numbers; a 0-d bool, complex or 1-element 1-d one is refused."""
    torch = pytest.importorskip("torch")
    payload = cepam.encode(X, cepam.Gaussian(sigma=torch.tensor(0.25, dtype=torch.float64)),
                           secret=SECRET, round=0, client=1, clip=torch.tensor(1.5))
    header = cepam.inspect(payload)
    assert header.clip == 1.5 and header.mechanism == cepam.Gaussian(sigma=0.25)
    assert cepam.Laplace(b=np.array(0.5)).b == 0.5
    for bad in (torch.tensor(True), torch.tensor(1 + 1j), torch.tensor([1.0]), np.array(True)):
        check(lambda: enc(clip=bad), IT, TYPE, "clip must be a number")
        check(lambda: cepam.Gaussian(sigma=bad), IT, TYPE, "sigma must be a real number")


def test_nan_message_locates_the_bad_value():
    err = check(lambda: enc(_nan_at(7)), IA, VALUE, r"non-finite")
    assert "7" in str(err)


def test_failed_encode_leaves_x_unchanged():
    x = _nan_at(1)
    before = x.copy()
    with pytest.raises(cepam.InvalidArgumentError):
        enc(x)
    np.testing.assert_array_equal(x, before)


# --- torch inputs (only where torch is installed). ---


def test_torch_unsupported_dtypes_are_invalid_type_errors():
    torch = pytest.importorskip("torch")
    for t in (torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.complex64),
              torch.ones(3, dtype=torch.bool)):
        check(lambda: enc(t), IT, TYPE, r"dtype")
    sparse = torch.eye(3).to_sparse()
    check(lambda: enc(sparse), IT, TYPE, r"sparse")
    with warnings.catch_warnings():  # ("in prototype stage")
        warnings.simplefilter("ignore", UserWarning)
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    check(lambda: enc(nested), IT, TYPE, r"nested")
    check(lambda: enc({"w": nested}), IT, TYPE, r"entry 'w': nested")


def test_a_lazy_modules_uninitialized_parameter_is_an_invalid_argument_error():
    torch = pytest.importorskip("torch")
    check(lambda: enc(torch.nn.LazyLinear(3).state_dict()), IA, VALUE,
          r"entry 'weight': an uninitialized \(lazy\) parameter .* forward pass")


def test_torch_nan_is_an_invalid_argument_error():
    torch = pytest.importorskip("torch")
    t = torch.ones(5, dtype=torch.bfloat16)
    t[3] = float("nan")
    check(lambda: enc({"w": t}), IA, VALUE, r"non-finite|NaN")


def test_torch_view_with_the_negative_bit_is_read_with_its_sign():
    torch = pytest.importorskip("torch")
    expected = enc(torch.from_numpy(-X), nonce=bytes(16))
    strided = torch.complex(torch.zeros(12), torch.from_numpy(X)).conj().imag  # -X
    contiguous = torch._neg_view(torch.from_numpy(X))  # -X; numpy() refuses it
    for v in (strided, contiguous):
        assert v.is_neg()
        assert enc(v, nonce=bytes(16)) == expected


class _DLPack:
    """An array that speaks DLPack only, claiming the device `device`."""

    def __init__(self, array, device, capsule=None):
        self.array, self.device, self.capsule = array, device, capsule

    def __dlpack__(self, *args, **kwargs):
        return self.capsule if self.capsule is not None else self.array.__dlpack__(*args,
                                                                                    **kwargs)

    def __dlpack_device__(self):
        return self.device


def test_a_broken_dlpack_array_is_an_invalid_type_error():
    check(lambda: enc(_DLPack(X, (1, 0), capsule=3)), IT, TYPE, r"DLPack")
    # A device that is not a (type, id) pair: read as host memory.
    np.testing.assert_array_equal(
        cepam.decode(enc(_DLPack(X, "cpu"), nonce=bytes(16)), secret=SECRET),
        cepam.decode(enc(X, nonce=bytes(16)), secret=SECRET))


def test_a_cuda_dlpack_array_without_torch_cuda_is_an_invalid_type_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch reaches CUDA here")
    check(lambda: enc(_DLPack(X, (2, 0))), IT, TYPE, r"torch cannot read this CUDA array")


# --- Codec context reuse. ---


def test_codec_refuses_to_encode_the_same_round_and_message_twice():
    codec = cepam.Codec(G, secret=SECRET, client=4)
    codec.encode(X, round=1)
    err = check(lambda: codec.encode(X, round=1), cepam.ContextReuseError, VALUE,
                r"round 1, message 0 .*client 4")
    assert isinstance(err, ValueError)
    # Also with different data, and with message given explicitly.
    check(lambda: codec.encode(X * 2, round=1, message=0), cepam.ContextReuseError, VALUE,
          r"already encoded")
    codec.encode(X, round=1, message=5)
    check(lambda: codec.encode(X, round=np.uint64(1), message=np.int8(5)),
          cepam.ContextReuseError, VALUE, r"round 1, message 5")


def test_codec_threads_sharing_it_encode_a_context_once():
    """The context is claimed before encoding, under a lock: threads sharing
    a Codec (no state file) get one payload and ContextReuseErrors."""
    codec = cepam.Codec(G, secret=SECRET, client=4, clip=1.0, threads=1)
    x = np.random.default_rng(0).normal(size=200_000).astype(np.float32)
    start = threading.Barrier(4)
    results: list[object] = []

    def worker() -> None:
        start.wait()
        try:
            results.append(codec.encode(x, round=0))
        except cepam.ContextReuseError as err:
            results.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, bytes) for r in results) == 1
    assert sum(isinstance(r, cepam.ContextReuseError) for r in results) == 3


@pytest.mark.parametrize("round_", [np.array([0, 1]), np.array([0]), "torch"])
def test_codec_decode_round_must_be_an_integer_after_a_round_too(round_):
    """The round's cached expectations compare types first: an array after
    an int round is an InvalidTypeError, as on the first call."""
    if isinstance(round_, str):
        torch = pytest.importorskip("torch")
        round_ = torch.tensor([0])
    codec = cepam.Codec(G, secret=SECRET, client=4, clip=1.0)
    payload = codec.encode(X, round=0)
    check(lambda: codec.decode(payload, round=round_), IT, TYPE, "integer")
    codec.decode(payload, round=0)
    check(lambda: codec.decode(payload, round=round_), IT, TYPE, "integer")
    check(lambda: codec.encode(X, round=round_), IT, TYPE, "integer")


def test_codec_same_round_with_a_different_message_is_fine():
    codec = cepam.Codec(G, secret=SECRET, client=4, allow_unclipped=True)
    a = codec.encode(X, round=1, message=0)
    b = codec.encode(X, round=1, message=1)
    c = codec.encode(X, round=2, message=0)
    assert len({a, b, c}) == 3
    for p in (a, b, c):
        assert codec.decode(p).shape == X.shape


def test_codec_failed_encode_does_not_use_up_the_context():
    """Nothing was sent when encode raised, so the same context can be used again."""
    codec = cepam.Codec(G, secret=SECRET, client=4, allow_unclipped=True)
    with pytest.raises(cepam.InvalidArgumentError):
        codec.encode(_nan_at(0), round=3)
    codec.encode(X, round=3)
    with pytest.raises(cepam.ContextReuseError):
        codec.encode(X, round=3)


def test_codec_reuse_tracking_is_per_object_a_second_codec_same_secret_and_client_can_reuse():
    """Documented behaviour: reuse tracking lives in the Codec object only.  A second
    Codec with the same secret and client is a separate object that does not know what
    the first encoded, so it will encode the same context again (the caller must not
    create two codecs for one client: the accountant counts one release a round).  The
    two payloads do not share their randomness (each its own nonce, format version 8)."""
    first = cepam.Codec(G, secret=SECRET, client=9)
    second = cepam.Codec(G, secret=SECRET, client=9)
    p1 = first.encode(X, round=0)
    p2 = second.encode(X, round=0)
    assert p1 != p2 and p1[:50] == p2[:50]  # the same header up to the nonce
    with pytest.raises(cepam.ContextReuseError):
        first.encode(X, round=0)
    with pytest.raises(cepam.ContextReuseError):
        second.encode(X, round=0)


def test_codec_decode_of_another_clients_payload_under_another_secret_fails_authentication():
    mine = cepam.Codec(G, secret=SECRET, client=1)
    theirs = cepam.Codec(G, secret=bytes(32), client=2)
    with pytest.raises(cepam.AuthenticationError):
        mine.decode(theirs.encode(X, round=0))


def test_module_level_encode_does_not_track_reuse():
    """Only Codec tracks contexts: cepam.encode twice under one context encodes twice,
    under two nonces (deterministic only under a nonce the caller passes)."""
    assert enc(round=5) != enc(round=5)
    assert enc(round=5, nonce=bytes(16)) == enc(round=5, nonce=bytes(16))


def test_settings_checked_before_are_reused_only_for_the_same_plain_arguments():
    # encode checks its settings once per distinct plain arguments: a value
    # equal to a cached one but of another type (True == 1 == 1.0) is
    # checked afresh, and so is one of a type the cache does not take.
    from cepam.encoding import _Settings

    def settings(**kw):
        args = dict(prefer="balanced", clip=1.0, coder="ans", non_float="error", pad=None,
                    structure=True, threads=1, buffers="separate", ties=())
        args.update(kw)
        return _Settings.checked(None, **args)

    assert settings() is settings()
    assert settings(clip=1) == settings() and settings(clip=1).clip == 1.0
    check(lambda: settings(clip=True), IT, TYPE, "clip")
    check(lambda: settings(structure=1), IT, TYPE, "structure")
    assert settings(clip=np.float64(2.0)).clip == 2.0
    assert settings(clip=np.float64(2.0)) is not settings(clip=np.float64(2.0))
    enc(clip=1.0)
    check(lambda: enc(clip=True), IT, TYPE, "clip")
    check(lambda: enc(threads=True), IT, TYPE, "threads")
    # A tuple may hold what is not hashable: it is checked, never a cache key.
    check(lambda: settings(clip=(1, [2])), IT, TYPE, "clip")
    check(lambda: enc(pad=([1],)), IT, TYPE, "pad")
    check(lambda: enc(coder=("ans", {})), IT, TYPE, "coder")


# --- arrays where a choice, a round or a context is expected. ---

_ARRAY = np.array([1.0, 2.0])


@pytest.mark.parametrize("call, match", [
    (lambda: enc(lattice=_ARRAY, clip=1.0), r"lattice must be a str"),
    (lambda: cepam.decode(enc(clip=1.0), secret=SECRET, output=_ARRAY), r"output must be a str"),
    (lambda: cepam.decode(enc(clip=1.0), secret=SECRET, dtype=_ARRAY), r"dtype must be a str"),
    (lambda: cepam.Codec(G, secret=SECRET, lattice=_ARRAY), r"lattice must be a str"),
])
def test_an_array_for_a_choice_is_an_invalid_type_error(call, match):
    check(call, IT, TYPE, match)


def test_codec_decode_checks_the_round_before_its_cache():
    """An array round equal to the cached one was compared, not checked:
    np.array([5.0]) after np.array(5) was taken as round 5."""
    codec = cepam.Codec(G, secret=SECRET, client=4, clip=1.0)
    payload = codec.encode(X, round=5)
    codec.decode(payload, round=np.array(5))  # a 0-d integer array is an integer
    check(lambda: codec.decode(payload, round=np.array([5.0])), IT, TYPE, "integer")
    check(lambda: codec.decode(payload, round=bytearray(32)), IT, TYPE, "integer")


def test_context_guard_checks_its_secret_and_context(tmp_path):
    guard = cepam.ContextGuard(tmp_path / "state.db")
    ctx = cepam.Context(0, 0)
    for method in (guard.claim, guard.release, guard.is_used):
        check(lambda: method(12, ctx), IT, TYPE, "secret must be bytes")
        check(lambda: method(None, ctx), IT, TYPE, "secret must be bytes")
        check(lambda: method(b"ab", ctx), IA, VALUE, "secret must be 32 bytes")
        check(lambda: method(SECRET, (0, 0, 0)), IT, TYPE, "context must be a cepam.Context")
    assert not guard.is_used(SECRET, ctx)


def test_a_path_whose_fspath_is_no_str_is_an_invalid_type_error():
    class Odd:
        def __fspath__(self):
            return 3

    check(lambda: cepam.ContextGuard(Odd()), IT, TYPE, "__fspath__")
    check(lambda: enc(state=Odd(), clip=1.0), IT, TYPE, "__fspath__")


def test_a_masked_array_is_refused_not_sent_unmasked():
    masked = np.ma.masked_array(np.ones(8, np.float32), mask=[0, 1] * 4)
    check(lambda: enc(masked, clip=1.0), IT, TYPE, "masked array")
    check(lambda: enc({"w": masked}, clip=1.0), IT, TYPE, "entry 'w': a masked array")
