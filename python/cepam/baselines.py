"""Scalar baselines: SDQ, Gaussian+SDQ and Laplace+SDQ (docs/design.md, section 7).

These are the schemes CEPAM is compared with, coded with the same payload
format and entropy coder as LRSUQ, so that bitrates compare fairly:

* **SDQ** (scalar subtractive dithered quantization) with step ``Delta``:
  ``y = Delta (round(x / Delta - v) + v)``, ``v ~ Uniform[-1/2, 1/2)`` from the
  stream shared with the server.  The error is Uniform[-Delta/2, Delta/2),
  variance ``Delta^2 / 12``, independent of ``x``.  No privacy by itself.
* **Gaussian+SDQ**: the client adds ``N(0, sigma^2)`` noise drawn from its own
  private generator (one the server does not know), then SDQ.  The error the
  server sees is ``N(0, sigma^2) + Uniform[-Delta/2, Delta/2)``, variance
  ``sigma^2 + Delta^2 / 12``.  The privacy comes from the Gaussian part alone.
* **Laplace+SDQ**: the same with ``Laplace(0, b)`` noise (variance ``2 b^2``).

Decode any of these payloads with :func:`cepam.decode`.

The private noise must never come from the shared secret: whoever holds the
secret (the server) could then remove it.  That is why these functions take
the noise generator as an argument (``rng``: a ``numpy.random.Generator`` or
a ``torch.Generator``) and refuse anything else.

>>> import numpy as np, cepam
>>> from cepam.baselines import encode_noisy_sdq
>>> secret = bytes(range(32))
>>> x = np.zeros(10_000)
>>> p = encode_noisy_sdq(x, cepam.Gaussian(sigma=0.1), step=0.1 * 12 ** 0.5,
...                      rng=np.random.default_rng(1), secret=secret, round=0, client=0)
>>> err = cepam.decode(p, secret=secret) - x
>>> bool(abs(err.std() / (0.1 * 2 ** 0.5) - 1) < 0.03)   # sigma^2 + Delta^2/12 = 2 sigma^2
True
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ._checks import check_clip, check_positive
from .codec import encode
from .errors import InvalidArgumentError, InvalidTypeError
from .flatten import flatten, unflatten
from .mechanisms import SDQ, Gaussian, Laplace
from .ties import resolve_ties

__all__ = [
    "encode_sdq",
    "encode_noisy_sdq",
    "encode_gaussian_sdq",
    "encode_laplace_sdq",
    "add_private_noise",
    "noisy_sdq_error_std",
    "noisy_sdq_error_cdf",
]


def _check_noise(noise: object) -> Gaussian | Laplace:
    if not isinstance(noise, (Gaussian, Laplace)):
        raise InvalidTypeError(
            "noise must be cepam.Gaussian(sigma=...) or cepam.Laplace(b=...), "
            f"got {type(noise).__name__}"
        )
    return noise


def _is_torch_generator(rng: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(rng, torch.Generator)


def _check_rng(rng: object) -> None:
    if isinstance(rng, np.random.Generator) or _is_torch_generator(rng):
        return
    if isinstance(rng, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(
            "rng must be the client's private generator (numpy.random.Generator or "
            "torch.Generator), not bytes: the noise must not come from the shared secret"
        )
    raise InvalidTypeError(
        "rng must be a numpy.random.Generator or a torch.Generator private to the client, "
        f"got {type(rng).__name__}"
    )


def _draw_noise(noise: Gaussian | Laplace, size: int, rng: Any) -> np.ndarray:
    """``size`` i.i.d. noise values (float64) from the client's generator."""
    if isinstance(rng, np.random.Generator):
        if isinstance(noise, Gaussian):
            return rng.normal(0.0, noise.sigma, size)
        return rng.laplace(0.0, noise.b, size)
    import torch

    if isinstance(noise, Gaussian):
        z = torch.randn(size, generator=rng, dtype=torch.float64) * noise.sigma
    else:  # Laplace(b) = b (E1 - E2), E1, E2 standard exponential
        e = torch.empty((2, size), dtype=torch.float64).exponential_(generator=rng)
        z = (e[0] - e[1]) * noise.b
    return z.numpy()


def _clip_flat(flat: np.ndarray, clip: float | None) -> np.ndarray:
    if clip is None:
        return flat
    clip = check_clip(clip)
    wide = flat.astype(np.float64)
    if not np.all(np.isfinite(wide)):
        raise InvalidArgumentError("the update contains a non-finite value (NaN or Inf)")
    norm = math.sqrt(float(np.dot(wide, wide)))
    return flat * (clip / norm) if norm > clip else flat


def add_private_noise(x: Any, noise: Gaussian | Laplace, *, rng: Any,
                      clip: float | None = None) -> Any:
    """Clips ``x`` to l2 norm ``clip`` (the whole update) and adds i.i.d. noise.

    Args:
        x: the update, as for :func:`cepam.encode` (numpy array, torch tensor,
            or a dict/list/tuple of them).
        noise: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``, its
            scale in the units of the update.
        rng: the client's private ``numpy.random.Generator`` or
            ``torch.Generator`` (never derived from the shared secret).
        clip: l2 norm bound of the whole update before the noise, or None.

    Returns:
        ``clip(x) + noise`` with the same structure, types and dtypes as
        ``x`` (torch tensors come back on the CPU; entries of a dict that
        share storage come back as one tensor, noised once).  The noise is drawn in
        float64 and rounded once to the update's dtype.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments.
    """
    noise = _check_noise(noise)
    _check_rng(rng)
    # As cepam.encode: counters left out, a tied tensor (shared storage) noised once.
    flat, structure = flatten(x, non_float="skip", ties=resolve_ties(x))
    flat = _clip_flat(flat, clip)
    noisy = flat.astype(np.float64) + _draw_noise(noise, flat.size, rng)
    return unflatten(noisy.astype(flat.dtype, copy=False), structure)


def encode_sdq(x: Any, *, step: float, secret: bytes, round: int, client: int,
               message: int = 0, clip: float | None = None, coder: str = "ans",
               threads: int | None = None, nonce: bytes | None = None) -> bytes:
    """Scalar SDQ of ``x`` with step ``step`` (no noise): ``cepam.encode(x, SDQ(step))``.

    Args:
        step: the SDQ step Delta, in the units of the update; the error is
            Uniform[-Delta/2, Delta/2), standard deviation ``Delta / sqrt(12)``
            (``cepam.SDQ.matching(std).step`` gives the step for a target std).
        secret, round, client, message, clip, coder, threads, nonce: as
            for :func:`cepam.encode` (``threads``: native threads, the same
            bytes for every count; ``nonce``: None, a fresh one).

    Returns:
        The payload (decode with :func:`cepam.decode`).

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments (as
            :func:`cepam.encode`, plus ``step``).
    """
    return encode(x, SDQ(check_positive("step", step)), secret=secret, round=round, client=client,
                  message=message, dim=1, lattice="Z", clip=clip, coder=coder, threads=threads,
                  nonce=nonce)


def encode_noisy_sdq(x: Any, noise: Gaussian | Laplace, *, step: float, rng: Any,
                     secret: bytes, round: int, client: int, message: int = 0,
                     clip: float | None = None, coder: str = "ans",
                     threads: int | None = None, nonce: bytes | None = None) -> bytes:
    """Noise from the client's private generator, then scalar SDQ (Gaussian+SDQ, Laplace+SDQ).

    The update is clipped to l2 norm ``clip`` (as a whole), the noise is added
    to the clipped update, and the noisy update is coded with
    ``cepam.SDQ(step)`` under the shared secret (the payload header records
    ``clip=None``: the clip was applied here, before the noise).  The server
    decodes with :func:`cepam.decode` and gets
    ``clip(x) + noise + Uniform[-step/2, step/2)``.

    Args:
        x: the update: numpy array, torch tensor, or a dict/list/tuple of them.
        noise: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``, its
            scale in the units of the update.
        step: the SDQ step Delta, in the units of the update.  The paper does
            not fix it; the bitrate benchmark uses ``sqrt(12) * sigma`` (an
            SDQ error with the same variance as the noise).
        rng: the client's private ``numpy.random.Generator`` or
            ``torch.Generator``.  The same generator state (and ``nonce``)
            gives the same payload; it must not be derived from the shared
            secret.
        secret, round, client, message, coder, threads, nonce: as for
            :func:`cepam.encode` (``threads``: native threads for the SDQ
            coding, the same bytes for every count; the noise is drawn from
            ``rng`` in one stream whatever the count; ``nonce``: None, a
            fresh one).
        clip: l2 norm bound of the update before the noise, or None.

    Returns:
        The payload bytes.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments (as
            :func:`cepam.encode`, plus ``noise``, ``step`` and ``rng``).
    """
    noise = _check_noise(noise)
    step = check_positive("step", step)
    _check_rng(rng)
    noisy = add_private_noise(x, noise, rng=rng, clip=clip)
    return encode(noisy, SDQ(step), secret=secret, round=round, client=client,
                  message=message, dim=1, lattice="Z", clip=None, coder=coder, threads=threads,
                  nonce=nonce)


def encode_gaussian_sdq(x: Any, sigma: float, *, step: float, rng: Any, secret: bytes,
                        round: int, client: int, message: int = 0,
                        clip: float | None = None, coder: str = "ans",
                        threads: int | None = None, nonce: bytes | None = None) -> bytes:
    """Gaussian+SDQ: ``encode_noisy_sdq(x, cepam.Gaussian(sigma), ...)``.

    Args:
        x: the update: numpy array, torch tensor, or a dict/list/tuple of them.
        sigma: the Gaussian noise's standard deviation per coordinate (> 0), in
            the units of the update.
        step: the SDQ step Delta, in the units of the update.
        rng: the client's private ``numpy.random.Generator`` or
            ``torch.Generator`` (never derived from the shared secret).
        secret, round, client, message, clip, coder, threads, nonce: as for
            :func:`encode_noisy_sdq`.

    Returns:
        The payload bytes.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments (as
            :func:`encode_noisy_sdq`).
    """
    return encode_noisy_sdq(x, Gaussian(sigma), step=step, rng=rng, secret=secret,
                            round=round, client=client, message=message, clip=clip,
                            coder=coder, threads=threads, nonce=nonce)


def encode_laplace_sdq(x: Any, b: float, *, step: float, rng: Any, secret: bytes,
                       round: int, client: int, message: int = 0,
                       clip: float | None = None, coder: str = "ans",
                       threads: int | None = None, nonce: bytes | None = None) -> bytes:
    """Laplace+SDQ: ``encode_noisy_sdq(x, cepam.Laplace(b), ...)``.

    Args:
        x: the update: numpy array, torch tensor, or a dict/list/tuple of them.
        b: the Laplace noise's scale per coordinate (> 0), in the units of
            the update.
        step: the SDQ step Delta, in the units of the update.
        rng: the client's private ``numpy.random.Generator`` or
            ``torch.Generator`` (never derived from the shared secret).
        secret, round, client, message, clip, coder, threads, nonce: as for
            :func:`encode_noisy_sdq`.

    Returns:
        The payload bytes.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments (as
            :func:`encode_noisy_sdq`).
    """
    return encode_noisy_sdq(x, Laplace(b), step=step, rng=rng, secret=secret, round=round,
                            client=client, message=message, clip=clip, coder=coder,
                            threads=threads, nonce=nonce)


def noisy_sdq_error_std(noise: Gaussian | Laplace | None, step: float) -> float:
    """Standard deviation of the decoded error of (noise+)SDQ, per coordinate.

    ``sqrt(noise.std^2 + step^2 / 12)``; ``noise=None`` for plain SDQ.
    """
    step = check_positive("step", step)
    var = step * step / 12.0
    if noise is not None:
        var += _check_noise(noise).std ** 2
    return math.sqrt(var)


def noisy_sdq_error_cdf(z: Any, noise: Gaussian | Laplace | None, step: float) -> np.ndarray:
    """CDF of the decoded error of (noise+)SDQ: noise + Uniform[-step/2, step/2).

    The convolution in closed form: ``F(z) = (1/step) * integral of F_noise``
    over ``[z - step/2, z + step/2]``.  For ``scipy.stats.kstest``.
    """
    step = check_positive("step", step)
    z = np.asarray(z, dtype=np.float64)
    lo, hi = z - step / 2.0, z + step / 2.0
    if noise is None:
        return np.clip((z + step / 2.0) / step, 0.0, 1.0)
    noise = _check_noise(noise)
    if isinstance(noise, Gaussian):
        from scipy.special import ndtr

        s = noise.sigma

        def antiderivative(t: np.ndarray) -> np.ndarray:  # integral of Phi(t/s) dt
            u = t / s
            return s * (u * ndtr(u) + np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi))
    else:
        b = noise.b

        def antiderivative(t: np.ndarray) -> np.ndarray:  # integral of the Laplace CDF
            e = 0.5 * b * np.exp(-np.abs(t) / b)
            return np.where(t < 0.0, e, t + e)
    return (antiderivative(hi) - antiderivative(lo)) / step
