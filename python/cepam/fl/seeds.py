"""Every random choice of an experiment, derived from its seed.

Randomness is never drawn from a global generator.  Each use gets its own
generator seeded by ``derive_seed(seed, purpose, ...)`` (SHA-256 of the parts),
for example ``("sample", round, client)`` for the local SGD samples of one
client in one round.  So a run is a function of its seed, clients do not
depend on how many clients are trained together, and a run resumed at round
t draws exactly what an uninterrupted run would have drawn.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

__all__ = ["derive_seed", "numpy_rng", "torch_generator", "client_secret", "payload_nonce",
           "MAX_SEED"]

_TAG = b"cepam.fl/v1"

#: The largest experiment seed: :func:`derive_seed` and :func:`client_secret`
#: hash it as a signed 64-bit integer (``FLConfig`` refuses a larger one).
MAX_SEED = 2**63 - 1


def derive_seed(seed: int, purpose: str, *parts: int) -> int:
    """A 63-bit seed for one purpose, a pure function of its arguments."""
    h = hashlib.sha256(_TAG)
    h.update(purpose.encode())
    for p in (seed, *parts):
        h.update(struct.pack("<q", int(p)))
    return int.from_bytes(h.digest()[:8], "little") >> 1


def numpy_rng(seed: int, purpose: str, *parts: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(derive_seed(seed, purpose, *parts)))


def torch_generator(seed: int, purpose: str, *parts: int):
    import torch

    return torch.Generator().manual_seed(derive_seed(seed, purpose, *parts))


def client_secret(seed: int, client: int) -> bytes:
    """The 32-byte secret that client ``client`` shares with the server.

    Derived from the experiment's seed so that experiments are reproducible.
    A real deployment must use ``cepam.new_secret()`` (one per client, kept
    as secret as a private key): whoever can compute the secret can remove
    most of the noise.
    """
    h = hashlib.sha256(_TAG + b"/secret")
    h.update(struct.pack("<qq", int(seed), int(client)))
    return h.digest()


def payload_nonce(secret: bytes, round: int, client: int) -> bytes:
    """The 16-byte payload nonce of client ``client``'s payload in round
    ``round`` under its experiment secret (:func:`client_secret`).

    An experiment passes it to ``cepam.encode(..., nonce=...)`` so that a run
    stays a function of its seed (a fresh random nonce would draw other
    noise in every run).  Each (round, client) is encoded once in a run, so
    no nonce is used twice under one context within a run; two runs of one
    seed share their nonces, so their payloads share noise (as a rerun
    should): an experiment secret is for simulation, never for updates that
    leave the machine.  A deployment passes no nonce (``cepam.encode`` draws
    a fresh one for each payload).
    """
    h = hashlib.sha256(_TAG + b"/nonce")
    h.update(bytes(secret))
    h.update(struct.pack("<qq", int(round), int(client)))
    return h.digest()[:16]
