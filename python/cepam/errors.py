"""Exceptions and warnings raised by cepam.

Every error cepam raises on purpose derives from :class:`CepamError` and also
from :class:`ValueError` or :class:`TypeError`, so callers can catch either the
library's own base class or the built-in category; bad arguments and bad
payloads always raise one of these.  The one exception is
:class:`DeviceError`, a :class:`RuntimeError`: a CUDA device or runtime that
failed, whatever the arguments.  :class:`PrecisionWarning`
is a :class:`UserWarning`.
"""

from __future__ import annotations

__all__ = [
    "CepamError",
    "DeviceError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "MissingPathError",
    "NotAFileError",
    "NotADirectoryPathError",
    "FormatError",
    "AuthenticationError",
    "ContextReuseError",
    "EncodingError",
    "DecodingError",
    "UnexpectedPayloadError",
    "PrecisionWarning",
    "NoiseWarning",
    "PrivacyWarning",
    "FileSafetyWarning",
    "RateWarning",
    "PrivacyBudgetError",
]


class CepamError(Exception):
    """Base class of every exception raised by cepam."""


class InvalidArgumentError(CepamError, ValueError):
    """An argument has the right type but a value cepam cannot accept."""


class InvalidTypeError(CepamError, TypeError):
    """An argument has a type (or dtype) cepam does not support."""


class MissingPathError(InvalidArgumentError, FileNotFoundError):
    """A file or directory that a call reads does not exist.  An
    :class:`InvalidArgumentError` (a ValueError) and a FileNotFoundError: the
    command line exits 1 for it, as for any file it cannot read."""


class NotAFileError(InvalidArgumentError, OSError):
    """A path that a call reads as a file names something else: a
    directory (an empty path names the current one), a FIFO, a device.  An
    :class:`InvalidArgumentError` (a ValueError) and an OSError: the command
    line exits 1 for it, as for any file it cannot read."""


class NotADirectoryPathError(InvalidArgumentError, NotADirectoryError):
    """A path that a call reads as a directory names something else (a
    file).  An :class:`InvalidArgumentError` (a ValueError) and a
    NotADirectoryError (an OSError): the command line exits 1 for it, as for
    any path it cannot read."""


class FormatError(CepamError, ValueError):
    """A payload is malformed: truncated, inconsistent or of an unknown format."""


class AuthenticationError(CepamError, ValueError):
    """A payload's tag does not verify: wrong secret, or the payload was altered."""


class ContextReuseError(CepamError, ValueError):
    """An encoder was asked to encode twice under the same (round, client, message)."""


class EncodingError(CepamError, ValueError):
    """The input cannot be encoded with these settings (for example its range
    is too large for the noise scale, so the rejection sampler hits its cap)."""


class DecodingError(FormatError):
    """An authentic payload decodes to values its output dtype cannot hold
    (they overflow it, e.g. float32 with a noise scale of 1e39).  A
    :class:`FormatError`, so code that drops malformed payloads drops these
    too; decoding with ``dtype="float64"`` may succeed."""


class UnexpectedPayloadError(CepamError, ValueError):
    """An authentic payload was encoded with other settings than the decoder
    was told to expect (mechanism, noise scale, clip, client or round).

    Raised after the tag verifies, so the payload really comes from a holder
    of the secret; a server refuses it rather than aggregate noise its
    accountant did not assume.

    Attributes:
        field: what differs: ``"mechanism"``, ``"clip"``, ``"client"`` or
            ``"round"`` (the noise scale is part of the mechanism).
        expected: the value the decoder expected.
        actual: the value the payload declares.
    """

    def __init__(self, field: str, expected: object, actual: object) -> None:
        self.field, self.expected, self.actual = field, expected, actual
        super().__init__(f"payload has {field} {actual!r}, expected {expected!r}: "
                         "it was encoded with other settings than this decoder enforces")

    def __reduce__(self):  # picklable with its attributes (e.g. across processes)
        return (type(self), (self.field, self.expected, self.actual))


class PrecisionWarning(UserWarning):
    """A decoded update was returned in a dtype whose rounding is not small
    against the noise, so the error is no longer the mechanism's law."""


class NoiseWarning(UserWarning):
    """The noise on the released average exceeds the scale of an update's
    coordinates (the clip over the square root of the model size): the model
    will hardly move from its start."""


class PrivacyWarning(UserWarning):
    """An update was encoded without a clip: its decoded values carry the
    mechanism's noise, but no differential-privacy guarantee follows, since
    nothing bounds what one client's data can change."""


class FileSafetyWarning(UserWarning):
    """A file cepam keeps its records in (a privacy ledger, a context guard)
    may be rewritten by users other than its owner: its group, or the user
    who owns it when that is not the current one (docs/guide/security.md)."""


class RateWarning(UserWarning):
    """A lattice was named (``lattice="E8"``, ``"D4"`` or ``"A2"``) where
    its payload is predicted to be longer than Z's (and its encode is
    slower): the update's rms over the noise scale is too low, its
    coordinates are mostly near zero or two-valued, or the coder is
    Golomb.  ``lattice="auto"`` (or ``"Z"``) would send fewer bits.  The
    message names the rule that fired (a threshold), not the update's
    statistics: those are not covered by the privacy guarantee, and
    warnings end up in logs."""


class DeviceError(CepamError, RuntimeError):
    """A CUDA device or its runtime failed (no usable driver or device, out of
    device memory, a failed kernel launch), or a GPU's results failed the
    host's spot-check (:func:`cepam.cuda.check_stage`: a few sub-vectors
    recomputed on the CPU after every GPU encode differ); the input itself
    was acceptable."""

class PrivacyBudgetError(CepamError, ValueError):
    """Spending more privacy would exceed the budget (``max_epsilon``) of a
    :class:`cepam.accounting.Ledger`; nothing was recorded."""
