"""Decoded dtypes keep the noise honest: low-precision entries come back in
float32 unless asked for, a dtype that rounds the noise away warns, and
values a dtype cannot hold are refused."""

import warnings

import numpy as np
import pytest

import cepam

from conftest import SECRET_A

M = 20_000
# One fixed payload nonce: the checks on the noise below (std within 6
# standard errors, a KS test at p > 1e-6) would otherwise fail about once in
# a million runs.
NONCE = bytes(range(16))


def normal(dtype=np.float32, seed=0):
    return np.random.default_rng(seed).normal(size=M).astype(dtype)


def enc(x, sigma, **kw):
    return cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=SECRET_A, round=0, client=0,
                        nonce=NONCE, **kw)


def test_bfloat16_default_output_keeps_the_noise():
    """The issue's case: bf16 x ~ N(0, 1), sigma = 1e-4.  Cast back to bf16 the
    error's std was 0.28 sigma; in float32 it is sigma."""
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(normal()).to(torch.bfloat16)
    payload = enc(x, 1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default neither warns nor rounds
        y = cepam.decode(payload, secret=SECRET_A)
    assert y.dtype == torch.float32 and y.shape == x.shape
    err = (y.double() - x.double()).numpy()
    assert float(np.std(err)) == pytest.approx(1e-4, rel=0.03)  # SE of the std: 0.5%
    assert float(np.mean(err == 0)) < 0.01
    stats = pytest.importorskip("scipy.stats")
    assert stats.kstest(err / 1e-4, "norm").pvalue > 1e-6

    with pytest.warns(cepam.PrecisionWarning, match="bfloat16.*times the noise std"):
        z = cepam.decode(payload, secret=SECRET_A, dtype="input")
    assert z.dtype == torch.bfloat16
    assert float(np.std((z.double() - x.double()).numpy())) < 0.5e-4  # what the issue saw
    # numpy has no bfloat16: dtype="input" with numpy output gives float32, no rounding
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = cepam.decode(payload, secret=SECRET_A, output="numpy", dtype="input")
    assert n.dtype == np.float32 and np.array_equal(n, y.numpy())


def test_float16_default_output_is_float32():
    x = normal(np.float16)
    payload = enc(x, 1e-4)
    y = cepam.decode(payload, secret=SECRET_A)
    assert y.dtype == np.float32
    assert float(np.std(y - x.astype(np.float32))) == pytest.approx(1e-4, rel=0.03)
    with pytest.warns(cepam.PrecisionWarning, match="float16"):
        assert cepam.decode(payload, secret=SECRET_A, dtype="input").dtype == np.float16
    # where float16 is fine for the noise, dtype="input" does not warn
    quiet = enc(x, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cepam.decode(quiet, secret=SECRET_A, dtype="input").dtype == np.float16


def test_overflow_in_the_output_dtype_is_refused():
    """float16 with sigma = 1e5, float32 with sigma = 1e39 used to give +-inf."""
    half = enc(normal(np.float16), 1e5)
    y = cepam.decode(half, secret=SECRET_A)
    assert y.dtype == np.float32 and np.all(np.isfinite(y))
    with pytest.raises(cepam.DecodingError, match="overflow float16"):
        cepam.decode(half, secret=SECRET_A, dtype="input")

    # A noise float32 cannot hold is refused on encode (cepam._finite); a
    # float64 update carries it.
    with pytest.raises(cepam.EncodingError, match="overflow float32"):
        enc(normal(np.float32, seed=1), 1e39)
    wide = cepam.decode(enc(normal(np.float64, seed=1), 1e39), secret=SECRET_A)
    assert wide.dtype == np.float64 and np.all(np.isfinite(wide))
    assert float(np.std(wide)) == pytest.approx(1e39, rel=0.03)
    with pytest.raises(cepam.DecodingError, match="float32") as info:
        cepam.decode(enc(normal(np.float64, seed=1), 1e39), secret=SECRET_A, dtype="float32")
    assert isinstance(info.value, cepam.FormatError)  # servers that drop bad payloads drop it


def test_float32_warns_when_it_cannot_hold_the_noise():
    x = np.ones(M, np.float32)
    payload = enc(x, 1e-9)
    with pytest.warns(cepam.PrecisionWarning, match="dtype='float64'"):
        assert cepam.decode(payload, secret=SECRET_A).dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = cepam.decode(payload, secret=SECRET_A, dtype="float64")
    assert float(np.std(y - 1.0)) == pytest.approx(1e-9, rel=0.03)


def test_float32_warns_when_the_noise_rounds_to_zeros():
    """A noise below float32's subnormals decodes a zero update to exact
    zeros: the rounding is the whole error, and the decoder says so."""
    payload = enc(np.zeros(1000, np.float32), 1e-100)
    with pytest.warns(cepam.PrecisionWarning, match="rms 0"):
        assert not cepam.decode(payload, secret=SECRET_A).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cepam.decode(payload, secret=SECRET_A, dtype="float64").all()


def test_explicit_output_dtypes_apply_to_every_entry():
    update = {"a": normal(np.float16)[:100], "b": normal(np.float64)[:10],
              "c": normal(np.float32)[:5]}
    payload = enc(update, 1e-2)
    y = cepam.decode(payload, secret=SECRET_A)
    assert [v.dtype for v in y.values()] == [np.float32, np.float64, np.float32]
    for choice in ("float32", "float64"):
        y = cepam.decode(payload, secret=SECRET_A, dtype=choice)
        assert all(v.dtype == np.dtype(choice) for v in y.values())
    # the float64 decode rounds to the float32 decode exactly (one computation)
    a = cepam.decode(payload, secret=SECRET_A, dtype="float32")
    b = cepam.decode(payload, secret=SECRET_A, dtype="float64")
    for k in update:
        assert np.array_equal(a[k], b[k].astype(np.float32))


def test_codec_decode_takes_dtype():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(normal()[:1000]).to(torch.float16)
    codec = cepam.Codec(cepam.Gaussian(sigma=1e-4), secret=SECRET_A, client=0,
                        allow_unclipped=True)
    payload = codec.encode(x, round=0)
    assert codec.decode(payload).dtype == torch.float32
    with pytest.warns(cepam.PrecisionWarning):
        assert codec.decode(payload, dtype="input").dtype == torch.float16
