"""Encode and decode model updates with LRSUQ.

``decode(encode(x)) == x + z`` where ``z`` has exactly the mechanism's noise
law (i.i.d. Gaussian or Laplace per coordinate), independent of ``x``; the
payload is a short authenticated byte string.  See docs/design.md, sections 1
and 5, and the paper (Ling et al., "CEPAM: Communication-Efficient and Privacy-Adaptable
Mechanism for Federated Learning").

Privacy caveat: the noise protects ``x`` only from parties who do not hold the
secret.  Whoever holds it (the trusted aggregator) can remove most of the
noise.  Keep secrets secret.  Each payload draws a fresh nonce (format
version 8), so no two payloads share their randomness by accident; still,
encode each (round, client, message) context once under a secret, since a
second payload is a second release the accountant does not count
(``state=PATH`` records used contexts on disk: :mod:`cepam.guard`).

A server enforces the noise its accountant assumes by decoding with
expectations (``decode(..., expect_mechanism=..., expect_clip=...,
expect_client=..., expect_round=...)``, or a server-side :class:`Codec`):
an authentic payload encoded with other settings raises
:class:`~cepam.errors.UnexpectedPayloadError`.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from .auto import _check_lattice
from .codec_object import Codec
from .decoding import DEFAULT_MAX_COORDINATES, _decode
from .encoding import (_UNCLIPPED, _Settings, _check_state, _guarded_encode, _resolve_nonce,
                       _update_norm)
from .errors import PrivacyWarning
from .expected import Expected
from .inspection import PayloadInfo, inspect
from .keys import Context, check_secret
from .lattices import LATTICE_NAMES
from .mechanisms import Mechanism, check_mechanism
from .flatten import flatten
from .structure import check_buffers
from .ties import check_ties, resolve_ties
from .threads import resolve_threads

__all__ = ["encode", "decode", "inspect", "update_norm", "Codec", "PayloadInfo", "LATTICE_NAMES"]


def encode(
    x: Any,
    mechanism: Mechanism,
    *,
    secret: bytes,
    round: int,
    client: int,
    message: int = 0,
    dim: int | None = None,
    lattice: str | None = None,
    prefer: str = "balanced",
    clip: float | None = None,
    coder: str = "ans",
    non_float: str = "skip",
    state: str | os.PathLike[str] | None = None,
    pad: str | int | None = None,
    structure: bool = True,
    threads: int | None = None,
    buffers: str = "separate",
    ties: Any = None,
    nonce: bytes | None = None,
) -> bytes:
    """Encodes a model update into a private, compressed payload.

    Args:
        x: the update: a numpy array or torch tensor (float32, float64,
            float16, or torch bfloat16), or a dict (e.g. a state_dict
            difference) or list/tuple of them, coded as one vector.
            Integer and bool entries of a dict are handled by ``non_float``.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``:
            the law of the error the server will see, per coordinate
            (``cepam.SDQ(step=...)``: the uniform-error baseline).
        secret: the 32 bytes shared with the server (``cepam.new_secret()``).
        round, client, message: the context, integers in [0, 2^64); each
            context must be used for one message only under a secret: a
            second payload of a round is a second release that the
            accountant does not count (its noise is independent of the
            first's, by the nonce).
        dim: sub-vector dimension n: 1 to 8 for "Z" (at most 4 for Laplace),
            default 1; the lattice's own dimension for "A2" (2), "D4" (4) and
            "E8" (8), which is the default (None).
        lattice: "auto" (the default when dim is None) picks the lattice
            from statistics of the clipped update (no trial encodes, unless
            ``prefer="bits"``): with "ans", Z with n = 1, or E8 where it is
            predicted to save at least 3 % of Z's bits (its encode runs at
            0.55 to 0.7 times Z's; the rule: ``_high_saves``); with
            "golomb", and for Laplace and SDQ, Z with n = 1.
            Otherwise (the default when dim is given: "Z") "Z" (the integer lattice Z^n), or the Voronoi
            lattices "A2" (hexagonal), "D4" or "E8", whose cells are rounder,
            so that fewer bits code the same noise at high signal-to-noise
            ratio (E8 the fewest), at the cost of more trials per sub-vector
            (1.10, 1.62 and 3.94 on average).  A2, D4 and E8 take the
            Gaussian mechanism only; naming one where it is predicted to
            cost more bits than Z warns (:class:`~cepam.errors.RateWarning`).
        prefer: what ``lattice="auto"`` weighs: "balanced" (the default: E8
            only where it is predicted to save at least 3 % of the bits),
            "bits" (the shorter payload: where E8 may be shorter, the update,
            or for more than 131,072 coordinates a 65,536-coordinate sample,
            is encoded with both Z and E8, the shorter kept; up to twice the
            encode time) or "speed" (always Z with n = 1, the fastest).
            Another choice than "balanced" with a named lattice is an error.
        clip: l2 norm bound for the whole update (all entries together), in
            the update's units, or None for no clipping (a
            :class:`~cepam.errors.PrivacyWarning`: no privacy guarantee
            follows without one).
        coder: the body coder: "ans" (rANS with models conditioned on the
            decoder's side information; the shortest payloads) or "golomb"
            (Golomb-coded H and exp-Golomb-coded M, the paper's choice).
        non_float: what to do with integer and bool entries of a dict
            (BatchNorm's ``num_batches_tracked``), which are counters, not
            model updates: "skip" (the default) leaves them out of the
            payload, never noised, so :func:`decode` returns the dict
            without them; "error" refuses them (InvalidTypeError).  In a
            list, tuple or alone they are always refused.
        state: a file in which to record the context (see
            :mod:`cepam.guard`): encoding a context already recorded there
            under this secret raises ContextReuseError, whichever process
            or codec recorded it.  None (the default): not recorded.
        pad: length hiding (:mod:`cepam.padding`): None (no padding),
            "bucket" (total length rounded up to a quarter-octave bucket,
            at most 19 % more), "max" (a size fixed by the public settings:
            mechanism, clip, coder, lattice, structure; needs a clip),
            "levels" (the smallest of 8 lengths fixed by the same settings,
            a third of an octave apart up to "max"'s: the length tells at
            most 3 bits; at most 26 % more above the lowest; needs a clip)
            or a size in bytes.  Padding is zero bytes inside the encrypted
            part.
        structure: True (the default) writes the entries' names, kinds,
            dtypes and shapes into the header, so that :func:`decode`
            rebuilds ``x``'s structure by itself; False writes the number of
            coordinates only (a bare payload, shorter by the entries less
            an 8-byte structure digest: 240 bytes, 0.30 bits per
            coordinate, for the 6,422-parameter MNIST CNN's state_dict), and
            the decoder must pass ``like=`` a template of the update.
        threads: native threads to use, 1 to ``cepam.threads.MAX_THREADS``;
            None (the default): the ``CEPAM_THREADS`` environment variable
            if set, else the cores this process may run on.  The payload
            is the same bytes for every count (for a given ``nonce``).
        buffers: what to do with a dict's float buffers, the running
            statistics of normalisation layers (entries named
            ``*.running_mean`` and ``*.running_var``, as BatchNorm's are):
            "separate" (the default) codes them, the clip shared apart
            between them and the weights (:mod:`cepam.statistics_clip`):
            an update over the clip whose weights the one joint clip
            (everything scaled by ``clip / |x|``) leaves at a norm of at least
            0.95 of the clip (``WEIGHT_FLOOR``) is clipped jointly;
            otherwise the weights are scaled to the norm
            ``w' = min(|w|, 0.95 clip)`` and the statistics to
            ``sqrt(clip^2 - w'^2)``, what the clip leaves: 0.31
            of the clip where the weights are at the floor, more where
            their norm is below it (0.87 of the clip for weights of norm
            clip / 2).  The whole update stays within ``clip`` (the
            guarantee is unchanged), and statistics whose changes can be
            10 to 100 times the weights' never push the weights' norm below
            ``min(|w|, 0.95 clip)``; "local" leaves them out of the payload (each
            side keeps its own, as FedBN does; :func:`decode` returns the dict
            without them); "joint" codes them as weights, under the one clip.
            Without a clip the choices "separate" and "joint" are the same.
        ties: tied entries of a dict (one tensor under several names, as a
            language model's embedding shared with its output layer) are
            coded once, under the first name, and counted once in the clip;
            the payload is the one of the dict without the other names (the
            same bytes), and :func:`decode` gives them back as the same
            tensor when it knows the ties (its ``like=`` or ``ties=``).
            Entries of ``x`` that share storage (the same memory, offset,
            shape, strides and dtype: a tied model's ``state_dict()``) are
            always tied; ``ties`` adds those ``x`` has lost (a
            ``state_dict`` difference computed name by name): the model
            (a ``torch.nn.Module``) or its ``state_dict``, whose ties are
            found by storage (:func:`cepam.find_ties`), or a
            mapping ``{name: tied-to name}``.  Values are never compared:
            of a tied name's entry only the shape and dtype are read.
            None (the default): the ties found in ``x`` only.
        nonce: None (the default): a fresh 16-byte nonce from the operating
            system's secure random source, written in the payload's header
            and mixed into its keys, so that no two payloads share their
            dithers, latent scales or sealing keystream, whatever the
            context.  16 bytes: this nonce, for deterministic payloads
            (golden files, reproducible experiments); the caller then
            answers for never passing one twice with the same secret and
            context (the noises of two such payloads are dependent).

    Returns:
        The payload bytes: a public header (format version, mechanism and
        scale, coder, clip, context, nonce, structure), the sealed (encrypted)
        lattice choice and body, and an authentication tag.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments, NaN or Inf in
            x, tied entries of different shapes or dtypes.
        EncodingError: x is too large relative to the noise scale, decoded
            values could overflow their dtype, or the payload exceeds the
            padded size (``pad="max"``, ``"levels"`` or a size).
        ContextReuseError: ``state`` records this context as used.

    Warns:
        PrivacyWarning: ``clip`` is None.
        RateWarning: a named lattice (A2, D4, E8) is predicted to cost more
            bits than Z for this update.
    """
    mechanism = check_mechanism(mechanism)
    choice = _check_lattice(lattice, dim, mechanism)
    secret, context = check_secret(secret), Context(round, client, message)
    settings = _Settings.checked(choice, prefer=prefer, clip=clip, coder=coder,
                                 non_float=non_float, pad=pad, structure=structure,
                                 threads=resolve_threads(threads), buffers=buffers,
                                 ties=check_ties(ties))
    nonce = _resolve_nonce(nonce)
    if clip is None:
        warnings.warn(_UNCLIPPED, PrivacyWarning, stacklevel=2)
    return _guarded_encode(_check_state(state), x, mechanism, secret, context, settings, nonce)


def update_norm(update: Any, *, buffers: str = "separate", ties: Any = None,
                threads: int | None = None) -> float:
    """The l2 norm of an update exactly as :func:`encode` measures it
    against its ``clip``: over the entries it codes, in the same sum.

    Size the clip from this norm, measured on real updates with the same
    ``buffers`` and ``ties`` as the encoder's (README, "Choosing sigma and
    clip"): integer and bool entries of a dict are left out (as
    ``non_float="skip"`` leaves them), so are the running statistics with
    ``buffers="local"``, and a tied tensor counts once.  With "separate"
    (and "joint") the statistics are in the norm: the clip bounds the whole
    update, and "separate" only decides, when the update is over the clip,
    how the clip is shared (the weights keep a norm of at least
    ``min(|w|, 0.95 clip)``; see :func:`encode`).  The norm is in the
    update's own units and is the same for every thread count.

    Args:
        update: as ``x`` of :func:`encode`: an array or tensor, or a dict
            (a ``state_dict`` difference), list or tuple of them.
        buffers: as for :func:`encode`: "separate" (the default), "local"
            or "joint".
        ties: as for :func:`encode` (entries of ``update`` that share
            storage are tied in any case).
        threads: native threads, as for :func:`encode`.

    Returns:
        The norm, a float >= 0.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`encode` (an
            unsupported update, NaN or Inf in it, a bad ``buffers``,
            ``ties`` or ``threads``).
    """
    groups = resolve_ties(update, check_ties(ties))
    flat, structure = flatten(update, non_float="skip", buffers=check_buffers(buffers),
                              ties=groups)
    return _update_norm(flat, structure, resolve_threads(threads))


def decode(payload: bytes, *, secret: bytes, output: str = "auto", dtype: str = "auto",
           max_coordinates: int | None = None, like: Any = None,
           expect_mechanism: Mechanism | None = None, expect_clip: float | None = None,
           expect_client: int | None = None, expect_round: int | None = None,
           threads: int | None = None, device: Any = None, buffers: str = "separate",
           ties: Any = None, out: Any = None) -> Any:
    """Decodes a payload into the noisy update ``x + z``.

    Args:
        payload: bytes from :func:`encode`.
        secret: the secret the payload was encoded with.
        output: "auto" (the same types as encoded: numpy arrays or torch CPU
            tensors; for a payload without structure, which does not say,
            the types of ``like``), "numpy" or "torch".
        dtype: the output dtypes.  "auto" (the default): float32 and
            float64 entries as encoded, float16 and bfloat16 entries as
            float32, because rounding ``x + z`` back to 11 or 8 significant
            bits would add rounding error to the noise (see
            :mod:`cepam.precision`).  "input": every entry in its encoded
            dtype (numpy has no bfloat16: float32).  "float32" or
            "float64": every entry in that dtype.
        max_coordinates: the largest update accepted.  None (the
            default): the size of ``like`` when given (its float entries,
            none tied), else 2^28 (a bare ``decode`` without ``like``
            accepts an authentic payload of up to 2^28 coordinates: 1 GiB
            of float32 output, 2 GiB of float64).  The decoder allocates
            the output before it has read the body, so a server without a
            template should pass the size of its model: a payload that
            claims more coordinates is refused after its tag verifies and
            before anything is allocated or decoded.  So is one that claims
            more than its body can carry (the bomb rule: at most 1024
            coordinates a body bit, so a 1 KB payload costs at most about
            64 MiB; see docs/format.md).
        like: a template of the update (an array or tensor, a list/tuple of
            them, a mapping such as a ``state_dict``, or a
            ``torch.nn.Module``: its ``state_dict()``) whose container,
            names, dtypes and shapes the result takes, and whose tied
            entries (found by storage) come back tied.  Required for a
            payload encoded with ``structure=False``, and then it must be the
            structure the payload was encoded from: the same names, order,
            dtypes and shapes (a digest of it is sealed in the payload); for a
            payload with a structure, optional, and the two must agree.  Only
            its structure is read (its values are not); integer and bool
            entries of a mapping are left out, as :func:`encode` leaves them
            out, and so are running statistics if ``buffers="local"``.
        expect_mechanism: if given, the payload's mechanism *and* noise
            scale must equal it (``cepam.Gaussian(sigma=...)``, ...).
        expect_clip: if given, the payload's clip must equal it (a payload
            encoded without a clip is refused too).
        expect_client: if given, the payload's client id must equal it.
        expect_round: if given, the payload's round must equal it.
            The expectations are how a server enforces what its accountant
            assumes: they are checked after the tag verifies (so the
            payload's settings are those its sender chose) and before the
            body is decoded.  None (the default) checks nothing.
        threads: native threads to use, as for :func:`encode` (the same
            values for every count).
        device: None (host memory), or ``"cuda"``, ``"cuda:N"`` or a
            ``torch.device``: the result as torch tensors in that GPU's
            memory, decoded there by the CUDA path where cepam has it and
            the update has at least
            :data:`cepam.cuda.DEVICE_DECODE_MIN_COORDINATES` coordinates
            (:func:`cepam.cuda.decodes_on_device`), else decoded on the host
            and copied, which is faster for smaller updates (the same
            values either way).
        buffers: the encoder's choice (see :func:`encode`); it matters only
            for ``like``: with "local" the template's running statistics are
            left out, as the encoder left them out.
        ties: as for :func:`encode` (a model, a ``state_dict`` or a mapping
            ``{name: tied-to name}``), besides the ties of ``like``: a
            payload does not carry its ties (it holds a tied tensor once,
            under its first name), so the decoder names them, and each tied
            name comes back as the *same* object as its coded entry.  A tie
            whose names the payload codes apart (an encoder that did not
            know it) is not imposed.
        out: memory to decode into, kept by the caller from round to round
            (no fresh output is allocated: the native decoder writes the
            values straight into it; with ``device=``, a torch tensor in
            that GPU's memory, which the GPU's decoder writes into).  For a
            single array or tensor, one like the result: a numpy array (or
            a CPU torch tensor, where the result is a tensor; a CUDA tensor
            with ``device=``) of the entry's shape, which is returned.  For
            a list, tuple or dict, a 1-D array or tensor of all the
            payload's coordinates (``inspect(payload).coordinates``), in the
            payload's order; the result's entries are then views of it
            (reshaped slices), so they change when ``out`` is decoded into
            again.  ``out`` must be C-contiguous, writable (a tensor must
            not require grad) and of the dtype the entries decode to (with
            ``dtype="auto"``, float32 unless an entry is float64), every
            entry in that one dtype, float32 or float64 (not the float16 or
            bfloat16 of ``dtype="input"``, a cast after decoding), and in
            host memory unless ``device=``
            names its GPU.  Checked before anything is written; a payload
            found malformed while its body is decoded may leave ``out``
            partly written.

    Returns:
        The same structure as the encoded update (array/tensor, list,
        tuple or dict), or the template's, with the same shapes, in the
        dtypes ``dtype`` gives.  Integer and bool entries that
        :func:`encode` left out (``non_float="skip"``) are absent; so are
        tied names unless ``like`` or ``ties`` names the ties.

    Raises:
        AuthenticationError: wrong secret or altered payload (checked
            before anything but the magic, version and length is read).
        UnexpectedPayloadError: the payload's mechanism, scale, clip, client
            or round differs from an expectation (its ``field``,
            ``expected`` and ``actual`` say which).
        FormatError: malformed payload, more than max_coordinates (or the
            size of ``like``), more
            coordinates than the body can carry, or a payload that does not
            fit ``like``.
        DecodingError: (a FormatError) decoded values overflow the output
            dtype (for example float32 with a noise scale near 1e38).
        InvalidArgumentError: a payload without structure and no ``like``;
            an ``out`` of another dtype, shape or device, not
            C-contiguous, read-only, or for entries of several dtypes; a
            ``dtype`` or ``buffers`` that is not one of its choices.
        InvalidTypeError: ``out`` is not a numpy array or torch tensor, or
            a ``dtype`` or ``buffers`` that is not a str.
        DeviceError: (a RuntimeError) with ``device=``: no usable CUDA
            driver or device, out of device memory, or a failed kernel.

    Warns:
        PrecisionWarning: an output dtype rounds the values by more than a
            tenth of the noise's standard deviation.
    """
    secret = check_secret(secret)
    expected = Expected.checked(mechanism=expect_mechanism, clip=expect_clip,
                                client=expect_client, round=expect_round)
    return _decode(payload, secret, output, dtype, max_coordinates, expected, like, threads,
                   device, buffers, check_ties(ties), out)
