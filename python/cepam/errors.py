"""Exceptions raised by cepam.

Every error cepam raises on purpose derives from :class:`CepamError` and also
from :class:`ValueError` or :class:`TypeError`, so callers can catch either the
library's own base class or the built-in category.
"""

from __future__ import annotations

__all__ = [
    "CepamError",
    "DeviceError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "FormatError",
    "AuthenticationError",
    "ContextReuseError",
    "EncodingError",
]


class CepamError(Exception):
    """Base class of every exception raised by cepam."""


class InvalidArgumentError(CepamError, ValueError):
    """An argument has the right type but a value cepam cannot accept."""


class InvalidTypeError(CepamError, TypeError):
    """An argument has a type (or dtype) cepam does not support."""


class FormatError(CepamError, ValueError):
    """A payload is malformed: truncated, inconsistent or of an unknown format."""


class AuthenticationError(CepamError, ValueError):
    """A payload's tag does not verify: wrong secret, or the payload was altered."""


class ContextReuseError(CepamError, ValueError):
    """An encoder was asked to encode twice under the same (round, client, message)."""


class EncodingError(CepamError, ValueError):
    """The input cannot be encoded with these settings (for example its range
    is too large for the noise scale, so the rejection sampler hits its cap)."""


class DeviceError(CepamError, RuntimeError):
    """A CUDA device or its runtime failed (no usable driver or device, out of
    device memory, a failed kernel launch); the input itself was acceptable."""
