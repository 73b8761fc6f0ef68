"""Where the secret a client shares with the server comes from.

Two ways, chosen by the server (:class:`~cepam.flower.CepamStrategy`'s
``secrets``):

* **Pre-shared** (``secrets`` a mapping or callable: node id -> 32 bytes):
  the client reads its secret from its node configuration,
  ``flower-supernode --node-config "cepam-secret='<64 hex digits>'"``
  (:data:`NODE_CONFIG_KEY`).
* **Key agreement** (``secrets=None``, the default; no setup): X25519
  (RFC 7748, the ``cryptography`` package).  The server draws a key pair per
  run and sends its public key in the train configuration; each client keeps
  one key pair per run in its Context state and returns its public key with
  its reply.  Both sides derive the 32-byte secret as
  ``HKDF-SHA256(X25519(own private, peer public), salt=SALT,
  info=SALT || run id || server public || client public)`` (RFC 5869), so a
  secret is bound to one run and one pair of keys.  The server pins the
  first public key it sees from a node for the run (a later reply under
  another key is dropped).

What key agreement does and does not protect against: a passive
eavesdropper on the links learns nothing of the secrets (and so cannot strip
the noise); an *active* man in the middle can run the agreement with both
sides and read every update, so deploy it over Flower's TLS and node
authentication, which authenticate the two ends.  In every mode the server
holds the secrets and can remove most of the noise of each update: the
privacy the accountant reports is against everyone else (other clients,
third parties who see the released model), with the server trusted.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Union

from cepam.errors import InvalidArgumentError, InvalidTypeError
from cepam.keys import SECRET_BYTES, check_secret, hkdf

__all__ = ["NODE_CONFIG_KEY", "SALT", "SecretSource", "KeyPair", "agreed_secret",
           "secret_from_node_config", "preshared_lookup"]

NODE_CONFIG_KEY = "cepam-secret"
SALT = b"cepam/flower/x25519/v1"

SecretSource = Union[Mapping[int, bytes], Callable[[int], bytes]]


def _x25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import x25519
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("key agreement needs cryptography: pip install \"cepam[flower]\""
                          ) from None
    return x25519


class KeyPair:
    """An X25519 key pair (raw 32-byte private and public keys)."""

    def __init__(self, private: bytes | None = None) -> None:
        x25519 = _x25519()
        if private is None:
            self._key = x25519.X25519PrivateKey.generate()
        else:
            self._key = x25519.X25519PrivateKey.from_private_bytes(bytes(private))
        from cryptography.hazmat.primitives import serialization as s

        self.private = self._key.private_bytes(s.Encoding.Raw, s.PrivateFormat.Raw,
                                               s.NoEncryption())
        self.public = self._key.public_key().public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)

    def exchange(self, peer_public: bytes) -> bytes:
        """The X25519 shared value with a peer's raw public key.

        Raises:
            InvalidArgumentError: not a 32-byte key, or a low-order point.
        """
        peer_public = bytes(peer_public)
        if len(peer_public) != 32:
            raise InvalidArgumentError(f"an X25519 public key has 32 bytes, got {len(peer_public)}")
        x25519 = _x25519()
        try:
            return self._key.exchange(x25519.X25519PublicKey.from_public_bytes(peer_public))
        except ValueError as exc:  # the all-zero output of a low-order point
            raise InvalidArgumentError(f"X25519 key agreement failed: {exc}") from None


def agreed_secret(own: KeyPair, peer_public: bytes, *, run_id: int, server_public: bytes,
                  client_public: bytes) -> bytes:
    """The 32-byte cepam secret of one client and the server for one run.

    Raises:
        InvalidArgumentError: a malformed public key.
    """
    shared = own.exchange(peer_public)
    info = SALT + struct.pack("<Q", int(run_id) % (1 << 64)) + bytes(server_public) \
        + bytes(client_public)
    return hkdf(shared, salt=SALT, info=info, length=SECRET_BYTES)


def secret_from_node_config(node_config: Mapping[str, Any]) -> bytes:
    """The pre-shared secret of a node: ``node_config["cepam-secret"]``, 64 hex digits.

    Raises:
        InvalidArgumentError: missing or not 32 bytes of hex.
    """
    if NODE_CONFIG_KEY not in node_config:
        raise InvalidArgumentError(
            f"the server uses pre-shared secrets but this node has no {NODE_CONFIG_KEY!r} in "
            f"its node config (flower-supernode --node-config \"{NODE_CONFIG_KEY}='<64 hex "
            "digits>'\")")
    value = node_config[NODE_CONFIG_KEY]
    try:
        return check_secret(bytes.fromhex(str(value)))
    except ValueError:
        raise InvalidArgumentError(f"{NODE_CONFIG_KEY} must be 64 hex digits") from None


def preshared_lookup(secrets: SecretSource) -> Callable[[int], bytes]:
    """A function node id -> secret from a mapping or callable.

    Raises:
        InvalidTypeError: neither a mapping nor a callable.
    """
    if isinstance(secrets, Mapping):
        table = dict(secrets)

        def lookup(node_id: int) -> bytes:
            if node_id not in table:
                raise InvalidArgumentError(f"no pre-shared secret for node {node_id}")
            return check_secret(table[node_id])

        return lookup
    if callable(secrets):
        return lambda node_id: check_secret(secrets(node_id))
    raise InvalidTypeError(
        f"secrets must be None (key agreement), a mapping or a callable, got "
        f"{type(secrets).__name__}")
