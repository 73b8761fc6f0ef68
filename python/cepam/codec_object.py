"""A client's (or the server's, for one client) codec: :class:`Codec`, its
settings checked once and fixed, its record of the contexts it encoded."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from ._checks import check_flag
from .auto import _AUTO, _check_lattice
from .decoding import _decode
from .encoding import _UNCLIPPED, _Settings, _check_state, _guarded_encode, _resolve_nonce
from .errors import ContextReuseError, InvalidTypeError, PrivacyWarning
from .expected import Expected
from .keys import Context, check_integer, check_secret, check_u64
from .lattices import LATTICES
from .mechanisms import Mechanism, check_mechanism
from .payload import CODERS
from .ties import TiePairs, check_ties

__all__ = ["Codec"]


@dataclass(frozen=True)
class _CodecSettings:
    """A codec's settings, checked once when it is built."""

    mechanism: Mechanism
    secret: bytes = field(repr=False)
    client: int
    encoder: _Settings  # its threads None: resolved at each call
    expected: Expected  # what decode enforces (with the round of each call)


class Codec:
    """The codec settings of one client (or of the server for one client).

    A client encodes each round's update with :meth:`encode`; the codec
    refuses to encode twice under the same (round, message), since a reused
    context is a second release of the round that the accountant does not
    count (the payload nonce keeps the two noises independent).  That record
    is in memory, for this object only; ``state=PATH`` keeps it in a file
    shared by every codec and process that names it (:mod:`cepam.guard`).

    The server decodes with :meth:`decode`, which enforces the codec's
    settings: a payload whose mechanism or noise scale, client, or clip
    (when the codec has one) differs raises
    :class:`~cepam.errors.UnexpectedPayloadError`, so a malicious or
    misconfigured client cannot send less noise than the server's
    accountant assumes.  (:func:`decode` with the secret checks only what
    it is told to expect.)

    Args:
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``.
        secret: 32 bytes shared by this client and the server.
        client: the client id, an integer in [0, 2^64).
        dim, lattice, prefer, coder, non_float, pad, structure, buffers, ties: as
            for :func:`encode` (the decoder reads the lattice and coder from
            the payload; ``ties`` also names the ties :meth:`decode` gives
            back; a module's ties are read once, here).
        clip: as for :func:`encode`; on a server, the clip its accountant
            assumes (None: payloads with any clip are accepted, except none
            at all unless ``allow_unclipped``).  A codec that encodes without
            a clip warns once (:class:`~cepam.errors.PrivacyWarning`).
        allow_unclipped: whether :meth:`decode` accepts payloads encoded
            without a clip (default False: they carry no privacy guarantee,
            so a server refuses them with
            :class:`~cepam.errors.UnexpectedPayloadError`).
        threads: native threads for encode and decode, as for
            :func:`encode` (None: resolved at each call).
        state: a file recording the contexts encoded under this secret
            (:mod:`cepam.guard`), or None (in memory only).

    A codec's settings are checked once, here, and fixed: its attributes
    (``mechanism``, ``client``, ``lattice``, ``dim``, ``clip``, ...) are
    read-only, and assigning one raises AttributeError (create another
    codec instead).  A codec holds its secret: it is never shown by
    ``repr`` and a codec cannot be pickled or copied (pickling would write
    the secret wherever the bytes go); create one in each process from the
    secret instead.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings.
    """

    __slots__ = ("_settings", "_guard", "_used", "_warned", "_round_expected")

    def __init__(self, mechanism: Mechanism, *, secret: bytes, client: int = 0,
                 dim: int | None = None, lattice: str | None = None,
                 prefer: str = "balanced",
                 clip: float | None = None, coder: str = "ans", non_float: str = "skip",
                 pad: str | int | None = None, structure: bool = True,
                 threads: int | None = None,
                 state: str | os.PathLike[str] | None = None,
                 buffers: str = "separate", allow_unclipped: bool = False,
                 ties: Any = None) -> None:
        mechanism = check_mechanism(mechanism)
        encoder = _Settings.checked(_check_lattice(lattice, dim, mechanism), prefer=prefer,
                                    clip=clip, coder=coder, non_float=non_float, pad=pad,
                                    structure=structure, threads=threads, buffers=buffers,
                                    ties=check_ties(ties))
        allow_unclipped = check_flag("allow_unclipped", allow_unclipped)
        secret = check_secret(secret)
        client = check_u64("client", client)
        expected = Expected(mechanism=mechanism,
                            clip=None if math.isinf(encoder.clip) else encoder.clip,
                            client=client, clipped=not allow_unclipped)
        fields = dict(_settings=_CodecSettings(mechanism, secret, client, encoder, expected),
                      _guard=_check_state(state), _used={}, _warned=False,
                      _round_expected=None)
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"cannot set {name!r}: a cepam.Codec's settings are fixed when it is built; "
            "create another Codec with the settings you want")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    @property
    def mechanism(self) -> Mechanism:
        """The mechanism and its noise scale."""
        return self._settings.mechanism

    @property
    def client(self) -> int:
        """The client id."""
        return self._settings.client

    @property
    def lattice(self) -> str:
        """The lattice's name, or "auto"."""
        choice = self._settings.encoder.lattice
        return "auto" if choice is _AUTO else LATTICES[choice[0]]

    @property
    def dim(self) -> int | None:
        """The lattice's dimension (None with ``lattice="auto"``)."""
        choice = self._settings.encoder.lattice
        return None if choice is _AUTO else choice[1]

    @property
    def prefer(self) -> str:
        """What ``lattice="auto"`` weighs (see :func:`encode`)."""
        return self._settings.encoder.prefer

    @property
    def clip(self) -> float | None:
        """The l2 clip, or None (no clip)."""
        clip = self._settings.encoder.clip
        return None if math.isinf(clip) else clip

    @property
    def coder(self) -> str:
        """The body coder, "ans" or "golomb"."""
        return CODERS[self._settings.encoder.coder]

    @property
    def non_float(self) -> str:
        """What is done with integer and bool entries ("skip" or "error")."""
        return self._settings.encoder.non_float

    @property
    def pad(self) -> str | int | None:
        """The length hiding (see :func:`encode`)."""
        return self._settings.encoder.pad

    @property
    def structure(self) -> bool:
        """Whether payloads carry the update's structure."""
        return self._settings.encoder.structure

    @property
    def buffers(self) -> str:
        """What is done with running statistics ("separate", "local" or "joint")."""
        return self._settings.encoder.buffers

    @property
    def ties(self) -> TiePairs:
        """The tied entries named at construction, as (name, tied-to name) pairs."""
        return self._settings.encoder.ties

    @property
    def threads(self) -> int | None:
        """The native threads, or None (resolved at each call)."""
        return self._settings.encoder.threads

    @property
    def allow_unclipped(self) -> bool:
        """Whether :meth:`decode` accepts payloads encoded without a clip."""
        return not self._settings.expected.clipped

    def __repr__(self) -> str:
        return (f"Codec({self.mechanism!r}, client={self.client}, dim={self.dim}, "
                f"lattice={self.lattice!r}, clip={self.clip}, coder={self.coder!r}, "
                f"pad={self.pad!r})")

    def __reduce_ex__(self, protocol: object) -> Any:
        raise InvalidTypeError(
            "a cepam.Codec holds its secret and cannot be pickled or copied: create a "
            "Codec in each process from the secret instead")

    def encode(self, x: Any, *, round: int, message: int = 0,
               nonce: bytes | None = None) -> bytes:
        """Encodes x under context (round, self.client, message), with a
        fresh payload nonce unless ``nonce`` (16 bytes) is given (see
        :func:`encode`).

        Raises:
            ContextReuseError: this codec (or, with ``state``, anyone
                recording in the same file) already encoded that context.
            CepamError: and the errors of :func:`encode`.
        """
        settings = self._settings
        context = Context(round, settings.client, message)
        key = (context.round, context.message)
        encoder = settings.encoder.at_call()
        nonce = _resolve_nonce(nonce)
        # The context is claimed before encoding, in one step (dict.setdefault
        # is atomic), so that threads sharing this codec cannot both encode
        # it; the claim is withdrawn if encoding fails (no payload was made).
        claim = object()
        if self._used.setdefault(key, claim) is not claim:
            raise ContextReuseError(
                f"round {context.round}, message {context.message} was already encoded "
                f"by client {settings.client}: a second payload of a round is a release "
                f"the accountant does not count"
            )
        try:
            if math.isinf(encoder.clip) and not self._warned:
                object.__setattr__(self, "_warned", True)
                warnings.warn(_UNCLIPPED, PrivacyWarning, stacklevel=2)
            return _guarded_encode(self._guard, x, settings.mechanism, settings.secret, context,
                                   encoder, nonce)
        except BaseException:
            del self._used[key]  # (ours: no other claim replaces it)
            raise

    def decode(self, payload: bytes, *, round: int | None = None, output: str = "auto",
               dtype: str = "auto", max_coordinates: int | None = None,
               like: Any = None, device: Any = None, out: Any = None) -> Any:
        """Decodes a payload encoded under this codec's secret, enforcing the
        codec's mechanism and scale, client and clip (if set; a payload
        without a clip is refused unless ``allow_unclipped``), and ``round``
        if given (see :func:`decode` for the other arguments; ``out``: the
        caller's memory to decode into, as for :func:`decode`).

        Raises:
            UnexpectedPayloadError: the payload's settings differ.
            CepamError: and the errors of :func:`decode`.
        """
        settings = self._settings
        expected = settings.expected
        if round is not None:  # (a server decodes a round's payloads in a row)
            if type(round) is not int:  # (an array's != compares element by element)
                round = check_integer("round", round)
            last = self._round_expected
            if last is None or last[0] != round:
                last = (round, replace(expected, round=check_u64("round", round)))
                object.__setattr__(self, "_round_expected", last)
            expected = last[1]
        return _decode(payload, settings.secret, output, dtype, max_coordinates, expected, like,
                       settings.encoder.threads, device, settings.encoder.buffers,
                       settings.encoder.ties, out)
