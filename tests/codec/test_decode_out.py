"""decode(..., out=): the values written into the caller's memory, the same
values as without it; bad buffers refused before anything is written."""

import numpy as np
import pytest

import cepam
from cepam.errors import InvalidArgumentError, InvalidTypeError

from conftest import SECRET_A

SIGMA = 1e-2


def enc(x, **kw):
    return cepam.encode(x, cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, round=0, client=0,
                        clip=100.0, threads=1, **kw)


def x32(shape=(30, 7), seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_out_is_written_in_place_and_returned(coder, lattice):
    x = x32()
    payload = enc(x, coder=coder, lattice=lattice)
    expected = cepam.decode(payload, secret=SECRET_A)
    out = np.full(x.shape, np.nan, np.float32)
    address = out.ctypes.data
    got = cepam.decode(payload, secret=SECRET_A, out=out)
    assert got is out and out.ctypes.data == address
    np.testing.assert_array_equal(out, expected)
    # Round after round into the same memory: each round's own values.
    other = enc(x32(seed=1), coder=coder, lattice=lattice)
    assert cepam.decode(other, secret=SECRET_A, out=out) is out
    np.testing.assert_array_equal(out, cepam.decode(other, secret=SECRET_A))


def test_out_float64_and_threads():
    x = np.random.default_rng(2).normal(size=50_000)  # float64
    payload = enc(x)
    out = np.empty_like(x)
    assert cepam.decode(payload, secret=SECRET_A, out=out, threads=2) is out
    np.testing.assert_array_equal(out, cepam.decode(payload, secret=SECRET_A, threads=1))


def test_out_of_a_dict_holds_every_entry_and_the_entries_are_its_views():
    rng = np.random.default_rng(3)
    update = {"a.weight": rng.normal(size=(4, 5)).astype(np.float32),
              "a.bias": rng.normal(size=5).astype(np.float32),
              "b": rng.normal(size=(2, 3, 2)).astype(np.float32)}
    payload = enc(update)
    expected = cepam.decode(payload, secret=SECRET_A)
    m = cepam.inspect(payload).coordinates
    out = np.zeros(m, np.float32)
    got = cepam.decode(payload, secret=SECRET_A, out=out)
    assert list(got) == list(expected)
    start = 0
    for name, value in got.items():
        np.testing.assert_array_equal(value, expected[name])
        assert np.shares_memory(value, out) and value.shape == update[name].shape
        np.testing.assert_array_equal(out[start:start + value.size], value.ravel())
        start += value.size
    assert start == m


def test_out_of_a_list_and_codec():
    update = [x32((3, 4)), x32((6,), seed=1)]
    codec = cepam.Codec(cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, client=0, clip=100.0,
                        threads=1)
    payload = codec.encode(update, round=0)
    expected = codec.decode(payload)
    out = np.empty(18, np.float32)
    got = codec.decode(payload, out=out)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
        assert np.shares_memory(a, out)


def test_out_torch_tensor():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(x32((8, 9)))
    payload = enc(x)
    expected = cepam.decode(payload, secret=SECRET_A)
    out = torch.empty(8, 9)
    pointer = out.data_ptr()
    got = cepam.decode(payload, secret=SECRET_A, out=out)
    assert got is out and out.data_ptr() == pointer
    assert torch.equal(out, expected)
    # A state_dict into one flat tensor: entries are views of it.
    state = {"w": torch.from_numpy(x32((3, 3))), "b": torch.from_numpy(x32((3,), seed=4))}
    payload = enc(state)
    flat = torch.empty(12)
    got = cepam.decode(payload, secret=SECRET_A, out=flat)
    expected = cepam.decode(payload, secret=SECRET_A)
    for name in state:
        assert torch.equal(got[name], expected[name])
        assert got[name].data_ptr() in range(flat.data_ptr(), flat.data_ptr() + 48)
    with pytest.raises(InvalidArgumentError, match="grad"):
        cepam.decode(enc(x), secret=SECRET_A, out=torch.empty(8, 9, requires_grad=True))
    with pytest.raises(InvalidArgumentError, match="torch tensor"):
        cepam.decode(enc(x), secret=SECRET_A, out=np.empty((8, 9), np.float32))
    # output="numpy" makes a numpy out fit.
    y = cepam.decode(enc(x), secret=SECRET_A, output="numpy", out=np.empty((8, 9), np.float32))
    assert isinstance(y, np.ndarray)


@pytest.mark.parametrize("bad, error, match", [
    (np.empty((30, 7), np.float64), InvalidArgumentError, "dtype float64"),
    (np.empty(210, np.float32), InvalidArgumentError, "shape"),
    (np.empty((7, 30), np.float32), InvalidArgumentError, "shape"),
    (np.empty((30, 14), np.float32)[:, ::2], InvalidArgumentError, "C-contiguous"),
    (np.empty((7, 30), np.float32).T, InvalidArgumentError, "C-contiguous"),
    ([0.0] * 210, InvalidTypeError, "numpy array or a torch tensor"),
])
def test_bad_out_refused_untouched(bad, error, match):
    payload = enc(x32())
    before = None if isinstance(bad, list) else bad.copy()
    with pytest.raises(error, match=match):
        cepam.decode(payload, secret=SECRET_A, out=bad)
    if before is not None:
        np.testing.assert_array_equal(bad, before)


def test_read_only_out_refused():
    payload = enc(x32())
    out = np.zeros((30, 7), np.float32)
    out.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="writable"):
        cepam.decode(payload, secret=SECRET_A, out=out)
    assert not out.any()


def test_out_refused_for_entries_of_several_dtypes_and_with_device():
    update = {"a": x32((3,)), "b": np.ones(4)}  # float32 and float64
    payload = enc(update)
    with pytest.raises(InvalidArgumentError, match="one dtype"):
        cepam.decode(payload, secret=SECRET_A, out=np.empty(7))
    # dtype="float64" decodes both in one dtype: then it fits.
    got = cepam.decode(payload, secret=SECRET_A, dtype="float64", out=np.empty(7))
    assert got["a"].dtype == np.float64
    with pytest.raises(InvalidArgumentError, match="device"):
        cepam.decode(enc(x32()), secret=SECRET_A, device="cuda",
                     out=np.empty((30, 7), np.float32))


def test_out_refused_for_a_cast_after_decoding():
    payload = enc(x32().astype(np.float16))
    with pytest.raises(InvalidArgumentError, match="cast to float16 after decoding"):
        cepam.decode(payload, secret=SECRET_A, dtype="input", out=np.empty((30, 7), np.float16))
    got = cepam.decode(payload, secret=SECRET_A, out=np.empty((30, 7), np.float32))
    assert got.dtype == np.float32


def test_bare_payload_with_like_and_out():
    x = x32((5, 4))
    payload = enc(x, structure=False)
    out = np.empty((5, 4), np.float32)
    assert cepam.decode(payload, secret=SECRET_A, like=x, out=out) is out
    np.testing.assert_array_equal(out, cepam.decode(payload, secret=SECRET_A, like=x))


def test_native_out_checks():
    """The binding checks the buffer itself too (size, dtype, layout, writable)."""
    from cepam._native import core
    from cepam.keys import Context, stream_key
    from cepam.mechanisms import core_params

    x = x32((10,))
    key = stream_key(SECRET_A, Context(0, 0), bytes(16))
    params = core_params(cepam.Gaussian(sigma=SIGMA), lattice=1, n=1)
    body = core.encode(x, key=key, params=params, factor=1.0, coder=2, threads=1)
    kw = dict(m=10, key=key, params=params, coder=2, dtype="float32", threads=1)
    out = np.empty(10, np.float32)
    assert core.decode(body, out=out, **kw) is out
    np.testing.assert_array_equal(out, core.decode(body, **kw))
    for bad in (np.empty(11, np.float32), np.empty(10), np.empty(20, np.float32)[::2]):
        with pytest.raises(InvalidArgumentError):
            core.decode(body, out=bad, **kw)
    ro = np.empty(10, np.float32)
    ro.flags.writeable = False
    with pytest.raises(InvalidArgumentError):
        core.decode(body, out=ro, **kw)
