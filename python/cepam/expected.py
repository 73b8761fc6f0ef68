"""What a server expects of a payload: one definition, used by
:func:`cepam.decode` (its ``expect_*`` arguments), :class:`cepam.Codec` and
the Flower strategy (:class:`cepam.flower.CepamStrategy`).

An :class:`Expected` names the public header's fields a decoder enforces
(None: not checked) and checks a parsed header against them, raising
:class:`~cepam.errors.UnexpectedPayloadError` at the first field that
differs.  The header's layout stays :mod:`cepam.payload`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import check_clip
from .errors import UnexpectedPayloadError
from .keys import check_integer, check_u64
from .mechanisms import Mechanism, check_mechanism, mechanism_from_code
from .payload import Header

__all__ = ["Expected"]


@dataclass(frozen=True, init=False)
class Expected:
    """The header fields a decoder enforces; None: not checked.

    Attributes:
        mechanism: the mechanism and its scale.
        clip: the clip the payload must declare (a number; None: any).
        client: the context's client.
        round: the context's round.
        message: the context's message id.
        coordinates: the number of coordinates.
        clipped: refuse a payload without a clip, whatever ``clip`` says.
    """

    mechanism: Mechanism | None = None
    clip: float | None = None
    client: int | None = None
    round: int | None = None
    message: int | None = None
    coordinates: int | None = None
    clipped: bool = False

    def __init__(self, mechanism: Mechanism | None = None, clip: float | None = None,
                 client: int | None = None, round: int | None = None,
                 message: int | None = None, coordinates: int | None = None,
                 clipped: bool = False) -> None:
        # (the fields put in the instance's __dict__, not each set by
        # object.__setattr__ as a frozen dataclass's own __init__ does: a
        # third of its 1.1 us, on every decode with expectations; the class
        # stays a frozen dataclass: eq, hash, repr, replace)
        self.__dict__.update(mechanism=mechanism, clip=clip, client=client, round=round,
                             message=message, coordinates=coordinates, clipped=clipped)

    @classmethod
    def checked(cls, *, mechanism: object = None, clip: object = None, client: object = None,
                round: object = None, message: object = None, coordinates: object = None,
                clipped: bool = False) -> "Expected":
        """The expectation with each given field checked as an encoder checks it.

        Raises:
            InvalidTypeError, InvalidArgumentError: a field of the wrong type or
                out of range.
        """
        if (mechanism is None and clip is None and client is None and round is None
                and message is None and coordinates is None and not clipped):
            return _ANY  # (every decode without expectations: nothing to check or build)
        return cls(
            None if mechanism is None else check_mechanism(mechanism),
            None if clip is None else check_clip(clip),
            # (as a context checks them)
            None if client is None else check_u64("client", client),
            None if round is None else check_u64("round", round),
            None if message is None else check_u64("message", message),
            None if coordinates is None else check_integer("coordinates", coordinates),
            clipped,
        )

    def differences(self, header: Header) -> list[tuple[str, object, object]]:
        """Every field of a parsed header (:func:`cepam.payload.parse_header`)
        that differs from the expectation, in the order checked, as
        ``(field, expected, actual)``; empty when it is as expected."""
        found: list[tuple[str, object, object]] = []
        expected = self.mechanism
        # (a mechanism is its class, which its code names, and its scale)
        if expected is not None and (header.mechanism != expected.code
                                     or header.scale != expected.scale):
            actual = mechanism_from_code(header.mechanism, header.scale)
            if actual != expected:
                found.append(("mechanism", expected, actual))
        if self.clip is not None and header.clip != self.clip:
            found.append(("clip", self.clip, None if math.isinf(header.clip) else header.clip))
        elif self.clipped and math.isinf(header.clip):
            found.append(("clip", "a clip (this codec refuses unclipped payloads unless "
                                  "allow_unclipped=True)", None))
        context = header.context
        # (field by field, not in a loop over their names: a server checks
        # every payload, and a loop of getattr cost a microsecond of its 30)
        if self.client is not None and context.client != self.client:
            found.append(("client", self.client, context.client))
        if self.round is not None and context.round != self.round:
            found.append(("round", self.round, context.round))
        if self.message is not None and context.message != self.message:
            found.append(("message", self.message, context.message))
        if self.coordinates is not None and header.m != self.coordinates:
            found.append(("coordinates", self.coordinates, header.m))
        return found

    def enforce(self, header: Header) -> None:
        """Checks a parsed header (:func:`cepam.payload.parse_header`).

        Raises:
            UnexpectedPayloadError: at the first field that differs.
        """
        if self is _ANY:
            return
        found = self.differences(header)
        if found:
            raise UnexpectedPayloadError(*found[0])


_ANY = Expected()  # no expectation
