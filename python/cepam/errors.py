"""Exceptions raised by cepam.

Every error cepam raises on purpose derives from :class:`CepamError` and also
from :class:`ValueError` or :class:`TypeError`, so callers can catch either the
library's own base class or the built-in category.
"""

from __future__ import annotations

__all__ = [
    "CepamError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "FormatError",
    "AuthenticationError",
    "ContextReuseError",
    "EncodingError",
    "PrivacyBudgetError",
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


class PrivacyBudgetError(CepamError, ValueError):
    """Spending more privacy would exceed the budget (``max_epsilon``) of a
    :class:`cepam.accounting.Ledger`; nothing was recorded."""
