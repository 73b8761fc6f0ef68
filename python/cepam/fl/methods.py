"""The transports compared in the paper: how a client's update reaches the server.

A :class:`Method` maps one client's update (a dict of tensors: local weights
minus global weights) to a :class:`Message` at the client (:meth:`Method.send`)
and back to the server's estimate of the update (:meth:`Method.receive`).
Methods that compress produce real payload bytes with :func:`cepam.encode`
and the server decodes them with :func:`cepam.decode`; their bits are
``8 * len(payload)``.  Methods without compression send float32 tensors and
are charged 32 bits per coordinate (no payload exists; ``measured=False``).

========================  =========================================================
method                    client sends
========================  =========================================================
``fl``                    the update, float32 (no privacy, no compression)
``fl-sdq``                scalar subtractive dithered quantization, step Delta
``fl-gaussian``           clipped update + N(0, sigma^2) from the client's own
                          generator, float32
``fl-gaussian-sdq``       clipped update + N(0, sigma^2), then SDQ
``fl-laplace``            clipped update + Laplace(b), float32
``fl-laplace-sdq``        clipped update + Laplace(b), then SDQ
``cepam-gaussian``        LRSUQ payload whose error is exactly N(0, sigma^2)
                          (sub-vector dimension n, lattice), clip inside encode
``cepam-laplace``         LRSUQ payload whose error is exactly Laplace(b)
========================  =========================================================

Clipping: every private method clips the whole update to l2 norm ``clip``
(gamma) before noise, as the privacy analysis requires.  ``fl`` and
``fl-sdq`` are "no privacy" baselines in the paper and are not clipped
unless ``clip_all=True``.

SDQ step: the paper does not state the step of its SDQ baselines.  The
default is ``Delta = sqrt(12) * s``, so that the quantization error
(uniform, variance Delta^2 / 12) has the variance of the mechanism's noise:
``s = sigma`` for ``fl-gaussian-sdq`` and ``fl-sdq``, ``s = sqrt(2) b`` (the
Laplace standard deviation) for ``fl-laplace-sdq``.  ``sdq_step`` sets it.
The SDQ dither comes from the stream shared with the server (the key), the
Gaussian or Laplace noise from a generator the server does not know.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import cepam

from .._checks import check_choice, check_clip, check_flag, check_int, check_positive
from ..errors import InvalidArgumentError
from .config import LATTICES, METHODS, codec_dim, method_label
from .seeds import payload_nonce

__all__ = ["METHODS", "Message", "Method", "make_method", "method_label", "clip_update"]

@dataclass
class Message:
    """What one client sends in one round.

    ``payload`` holds the bytes for compressing methods (``tensors`` is
    None); ``tensors`` the float32 update for the others.  ``bits`` is
    ``8 * len(payload)``, or 32 per coordinate when there is no payload
    (``measured`` False).
    """

    payload: bytes | None
    tensors: dict[str, torch.Tensor] | None
    bits: int
    measured: bool


def _num_coordinates(update: dict[str, torch.Tensor]) -> int:
    return sum(int(v.numel()) for v in update.values())


def clip_update(update: dict[str, torch.Tensor], clip: float | None) -> dict[str, torch.Tensor]:
    """Scales the whole update to l2 norm at most ``clip`` (one norm over all tensors)."""
    if clip is None:
        return update
    norm = math.sqrt(sum(float(torch.sum(v.double() ** 2)) for v in update.values()))
    if norm <= clip:
        return update
    factor = clip / norm
    return {k: v * factor for k, v in update.items()}


def _laplace(shape: torch.Size, b: float, generator: torch.Generator) -> torch.Tensor:
    """Laplace(0, b) as b (E1 - E2), E1, E2 standard exponential."""
    e = torch.empty((2, *shape), dtype=torch.float64).exponential_(generator=generator)
    return (b * (e[0] - e[1])).to(torch.float32)


class Method:
    """One transport.  Subclasses set ``name`` and implement send/receive."""

    name = ""
    private = False   # adds privacy noise (and therefore clips)
    compressed = False

    def __init__(self, *, clip: float | None) -> None:
        self.clip = clip

    def send(self, update: dict[str, torch.Tensor], *, round: int, client: int, secret: bytes,
             noise: torch.Generator | None) -> Message:
        raise NotImplementedError

    def receive(self, message: Message, *, client: int, secret: bytes) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    @property
    def uses_noise_generator(self) -> bool:
        """Whether send() draws from the client's private generator."""
        return False

    def describe(self) -> dict:
        return {"method": self.name, "clip": self.clip}

    def _noisy(self, x: dict[str, torch.Tensor], noise: torch.Generator | None
               ) -> dict[str, torch.Tensor]:
        """x plus the client's own Gaussian (sigma) or Laplace (b) noise, if any,
        drawn from its private generator (never from the shared secret)."""
        sigma, b = getattr(self, "sigma", None), getattr(self, "b", None)
        if sigma is not None:
            return {k: v + sigma * torch.randn(v.shape, generator=noise, dtype=torch.float32)
                    for k, v in x.items()}
        if b is not None:
            return {k: v + _laplace(v.shape, b, noise) for k, v in x.items()}
        return x


class Plain(Method):
    """``fl``, ``fl-gaussian``, ``fl-laplace``: float32 tensors, optional noise."""

    def __init__(self, name: str, *, clip: float | None, sigma: float | None = None,
                 b: float | None = None) -> None:
        super().__init__(clip=clip)
        self.name, self.sigma, self.b = name, sigma, b
        self.private = sigma is not None or b is not None

    @property
    def uses_noise_generator(self) -> bool:
        return self.private

    def send(self, update, *, round, client, secret, noise):
        x = self._noisy(clip_update(update, self.clip), noise)
        x = {k: v.to(torch.float32).contiguous() for k, v in x.items()}
        return Message(None, x, 32 * _num_coordinates(x), measured=False)

    def receive(self, message, *, client, secret):
        return message.tensors


class SDQ(Method):
    """``fl-sdq``, ``fl-gaussian-sdq``, ``fl-laplace-sdq``: (noise, then) scalar SDQ."""

    compressed = True

    def __init__(self, name: str, *, clip: float | None, step: float,
                 sigma: float | None = None, b: float | None = None) -> None:
        super().__init__(clip=clip)
        self.name, self.sigma, self.b = name, sigma, b
        self.private = sigma is not None or b is not None
        self.step = float(step)
        self.mechanism = cepam.SDQ(step=self.step)

    @property
    def uses_noise_generator(self) -> bool:
        return self.private

    def send(self, update, *, round, client, secret, noise):
        x = self._noisy(clip_update(update, self.clip), noise)
        payload = cepam.encode(x, self.mechanism, secret=secret, round=round, client=client,
                               message=0, dim=1, nonce=payload_nonce(secret, round, client))
        return Message(payload, None, 8 * len(payload), measured=True)

    def receive(self, message, *, client, secret):
        return cepam.decode(message.payload, secret=secret, output="torch")

    def describe(self) -> dict:
        return {**super().describe(), "sdq_step": self.step}


class LRSUQ(Method):
    """``cepam-gaussian``, ``cepam-laplace``: one LRSUQ payload per client and round."""

    private = True
    compressed = True

    def __init__(self, name: str, *, clip: float | None, mechanism, dim: int,
                 lattice: str) -> None:
        super().__init__(clip=clip)
        # The A2 / D4 / E8 lattices have a fixed dimension, and "auto" picks
        # the lattice and its dimension for every update: the default n = 1
        # means "the lattice's own" there.
        dim = codec_dim(dim, lattice)
        # Fail now, not in round 1, on settings the codec refuses.
        probe = cepam.encode(torch.zeros(1), mechanism, secret=bytes(32), round=0, client=0,
                             dim=dim, lattice=lattice, clip=clip)
        self.name, self.mechanism, self.lattice = name, mechanism, lattice
        # dim: what every payload uses; None for "auto", whose choice on this
        # probe says nothing about the updates' (and which refuses a dim).
        self.dim = None if lattice == "auto" else cepam.inspect(probe, secret=bytes(32)).dim

    def send(self, update, *, round, client, secret, noise):
        payload = cepam.encode(update, self.mechanism, secret=secret, round=round,
                               client=client, message=0, dim=self.dim, lattice=self.lattice,
                               clip=self.clip, nonce=payload_nonce(secret, round, client))
        return Message(payload, None, 8 * len(payload), measured=True)

    def receive(self, message, *, client, secret):
        return cepam.decode(message.payload, secret=secret, output="torch")

    def describe(self) -> dict:
        return {**super().describe(), "dim": self.dim, "lattice": self.lattice}


def default_sdq_step(method: str, sigma: float, b: float) -> float:
    """sqrt(12) times the noise standard deviation (see the module docstring)."""
    std = math.sqrt(2.0) * b if method == "fl-laplace-sdq" else sigma
    return math.sqrt(12.0) * std


def make_method(method: str, *, sigma: float = 1e-3, b: float = 1e-3, dim: int = 1,
                lattice: str = "Z", clip: float | None = 1.0, clip_all: bool = False,
                sdq_step: float | None = None) -> Method:
    """Builds a transport by name (one of :data:`METHODS`).

    Args:
        sigma: Gaussian noise standard deviation per coordinate.
        b: Laplace scale per coordinate.
        dim, lattice: LRSUQ sub-vector dimension and lattice (CEPAM methods).
        clip: whole-update l2 clip gamma of the private methods (None: none).
        clip_all: clip ``fl`` and ``fl-sdq`` too.
        sdq_step: SDQ step Delta (default :func:`default_sdq_step`).

    Raises:
        InvalidTypeError: a ``method`` or ``lattice`` that is not a str, a
            ``sigma``, ``b``, ``clip`` or ``sdq_step`` that is not a real
            number, a ``dim`` that is not an int, or a ``clip_all`` that is
            not a bool.
        InvalidArgumentError: unknown method or lattice, a noise scale,
            clip or step that is not positive and finite, ``dim`` < 1, or
            bad settings (for example an SDQ method on a cepam without
            ``cepam.SDQ``).
    """
    method = check_choice("method", method, METHODS)
    sigma, b = check_positive("sigma", sigma), check_positive("b", b)
    dim = check_int("dim", dim, minimum=1)
    lattice = check_choice("lattice", lattice, LATTICES)
    clip = None if clip is None else check_clip(clip)
    clip_all = check_flag("clip_all", clip_all)
    sdq_step = None if sdq_step is None else check_positive("sdq_step", sdq_step)
    if not method.startswith("cepam") and dim != 1:
        raise InvalidArgumentError(f"dim applies to the CEPAM methods only, not {method!r}")
    baseline_clip = clip if clip_all else None
    if method in ("fl-sdq", "fl-gaussian-sdq", "fl-laplace-sdq"):
        step = sdq_step if sdq_step is not None else \
            check_positive("sdq_step", default_sdq_step(method, sigma, b))
    if method == "fl":
        return Plain(method, clip=baseline_clip)
    if method == "fl-gaussian":
        return Plain(method, clip=clip, sigma=cepam.Gaussian(sigma=sigma).sigma)
    if method == "fl-laplace":
        return Plain(method, clip=clip, b=cepam.Laplace(b=b).b)
    if method == "fl-sdq":
        return SDQ(method, clip=baseline_clip, step=step)
    if method == "fl-gaussian-sdq":
        return SDQ(method, clip=clip, step=step, sigma=cepam.Gaussian(sigma=sigma).sigma)
    if method == "fl-laplace-sdq":
        return SDQ(method, clip=clip, step=step, b=cepam.Laplace(b=b).b)
    if method == "cepam-gaussian":
        return LRSUQ(method, clip=clip, mechanism=cepam.Gaussian(sigma=sigma), dim=dim,
                     lattice=lattice)
    return LRSUQ(method, clip=clip, mechanism=cepam.Laplace(b=b), dim=dim, lattice=lattice)
