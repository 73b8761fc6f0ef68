"""Where the secret a client shares with the server comes from.

Two ways, chosen by the server (:class:`~cepam.flower.CepamStrategy`'s
``secrets``):

* **Pre-shared** (``secrets`` a mapping, a callable (node id -> 32 bytes),
  or the path of a secrets file, :func:`secrets_from_file`): the client
  reads its secret from a file named in its node configuration,
  ``flower-supernode --node-config "cepam-secret-file='/path/secret'"``
  (:data:`SECRET_FILE_KEY`; 64 hex digits; the file must not be readable by
  group or others, mode 0600).  ``cepam-secret='<64 hex digits>'``
  (:data:`NODE_CONFIG_KEY`) still works but puts the secret on the command
  line, readable in the process list: the mod warns.
* **Key agreement** (``secrets=None``, the default; no setup): X25519
  (RFC 7748, the ``cryptography`` package).  The server draws a key pair per
  run and sends its public key in the train configuration; each client keeps
  one key pair per run in its Context state and returns its public key with
  its reply (``cepam-key-file`` in the node config: the node's private key
  persists in that file, mode 0600, created on first use, so that its public
  key stays the same across runs and restarts and the server can pin it).
  Both sides derive the 32-byte secret as
  ``HKDF-SHA256(X25519(own private, peer public), salt=SALT,
  info=SALT || run id || server public || client public)`` (RFC 5869), so a
  secret is bound to one run and one pair of keys.  The server pins the
  first public key it sees from a node for the run (a later reply under
  another key is dropped).

**Keys bound to Flower's node identity**: :mod:`cepam.flower.identity`.

What key agreement does and does not protect against: a passive
eavesdropper on the links learns nothing of the secrets (and so cannot strip
the noise); an *active* man in the middle can run the agreement with both
sides and read every update, so deploy it over Flower's TLS and node
authentication, which authenticate the two ends, and bind the nodes' keys
to their Flower identity (above); the strategy warns whenever nothing
authenticates the keys (no ``signed_keys=True``, no
``authenticated_transport=True``, no pins or an empty pins file).  In every mode the server
holds the secrets and can remove most of the noise of each update: the
privacy the accountant reports is against everyone else (other clients,
third parties who see the released model), with the server trusted.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from typing import Any, Union

from cepam._files import create_key_file, read_key_file, read_private_file, write_key_file
from cepam.errors import FormatError, InvalidArgumentError, InvalidTypeError
from cepam.keys import SECRET_BYTES, check_secret, hkdf

from .identity import _asymmetric, node_identity

__all__ = ["NODE_CONFIG_KEY", "SECRET_FILE_KEY", "KEY_FILE_KEY", "STATE_KEY", "SALT",
           "SecretSource", "KeyPair", "agreed_secret", "secret_from_node_config",
           "preshared_lookup", "read_private_file", "secrets_from_file", "node_key_pair",
           "KeyPins"]

NODE_CONFIG_KEY = "cepam-secret"
SECRET_FILE_KEY = "cepam-secret-file"
KEY_FILE_KEY = "cepam-key-file"
STATE_KEY = "cepam-state"
SALT = b"cepam/flower/x25519/v1"

SecretSource = Union[Mapping[int, bytes], Callable[[int], bytes], str, os.PathLike]


def _x25519() -> Any:
    return _asymmetric("x25519", "key agreement needs cryptography")


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


def _hex_secret(text: str, what: str) -> bytes:
    try:
        return check_secret(bytes.fromhex(text.strip()))
    except ValueError:
        raise InvalidArgumentError(f"{what} must be 64 hex digits") from None


def secret_from_node_config(node_config: Mapping[str, Any]) -> bytes:
    """The pre-shared secret of a node: the file ``node_config["cepam-secret-file"]``
    names (64 hex digits, mode 0600), or ``node_config["cepam-secret"]`` (64 hex
    digits on the command line, visible in the process list: discouraged).

    Raises:
        InvalidArgumentError: neither given, an unsafe file, or not 32 bytes of hex.
    """
    if SECRET_FILE_KEY in node_config:
        path = str(node_config[SECRET_FILE_KEY])
        return _hex_secret(read_private_file(path), f"the secret in {path!r}")
    if NODE_CONFIG_KEY not in node_config:
        raise InvalidArgumentError(
            f"the server uses pre-shared secrets but this node has no {SECRET_FILE_KEY!r} "
            f"in its node config (flower-supernode --node-config \"{SECRET_FILE_KEY}="
            "'<file with 64 hex digits, mode 0600>'\")")
    return _hex_secret(str(node_config[NODE_CONFIG_KEY]), NODE_CONFIG_KEY)


def secrets_from_file(path: str | os.PathLike[str]) -> dict[int, bytes]:
    """The server's pre-shared secrets from a file of lines ``<node id> <64 hex
    digits>`` (blank lines and ``#`` comments ignored; mode 0600).

    Raises:
        InvalidArgumentError: an unsafe or malformed file, or a node listed twice.
    """
    table: dict[int, bytes] = {}
    for number, line in enumerate(read_private_file(path).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise InvalidArgumentError(f"{os.fspath(path)!r} line {number}: expected "
                                       "'<node id> <64 hex digits>'")
        node = int(parts[0])
        if node in table:
            raise InvalidArgumentError(f"{os.fspath(path)!r} lists node {node} twice")
        table[node] = _hex_secret(parts[1], f"line {number}'s secret")
    return table


def node_key_pair(path: str | os.PathLike[str]) -> KeyPair:
    """The node's persistent X25519 key pair: read from ``path`` (64 hex
    digits, mode 0600, owned by this user, not a symbolic link), or drawn
    and written there (mode 0600) if nothing is there.

    Raises:
        InvalidArgumentError: an unsafe or malformed file.
    """
    path = os.fspath(path)
    try:
        text = read_key_file(path, what="node key file").decode("ascii", "replace")
    except FileNotFoundError:
        pair = KeyPair()
        # Created whole or not at all, never over a file or link that is
        # there; a node that finds one (a racing process's) reads it.
        if create_key_file(path, (pair.private.hex() + "\n").encode("ascii"),
                           what="node key file"):
            return pair
        text = read_private_file(path)
    return KeyPair(_hex_secret(text, f"the key in {path!r}"))


class KeyPins:
    """Node public keys pinned on first use, kept in a JSON file across runs.

    Args:
        path: the file (created on the first pin); it maps node identities
            (:func:`node_identity`: an authentication key's fingerprint, or a
            Flower node id for a node whose key is not signed) to hex X25519
            public keys.

    Raises:
        FormatError: the file exists but is not such a mapping.
        InvalidArgumentError: a symbolic link, a file another user owns or
            group or others may write (docs/guide/security.md).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._keys: dict[str, bytes] = {}
        try:
            text = read_key_file(self.path, what="key-pin file", private=False)
        except FileNotFoundError:
            return
        try:
            raw = json.loads(text.decode("utf-8"))
            self._keys = {node_identity(k): bytes.fromhex(v) for k, v in raw.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise FormatError(f"{self.path!r} is not a cepam key-pin file ({exc})") from None

    def __len__(self) -> int:
        """The number of pinned keys."""
        return len(self._keys)

    def get(self, node: int | str) -> bytes | None:
        """The key pinned for ``node`` (a :func:`node_identity`), or None.

        Raises:
            InvalidTypeError, InvalidArgumentError: as :func:`node_identity`.
        """
        return self._keys.get(node_identity(node))

    def pin(self, node: int | str, public: bytes) -> None:
        """Pins ``public`` for ``node`` (a :func:`node_identity`; first use) and
        writes the file atomically (a new file, mode 0600, renamed over it).

        Raises:
            InvalidTypeError: as :func:`node_identity`.
            InvalidArgumentError: as :func:`node_identity`, a symbolic link at
                the path (left as it is), or the file cannot be written.
        """
        self._keys[node_identity(node)] = bytes(public)
        text = json.dumps({str(k): v.hex() for k, v in sorted(self._keys.items())}, indent=1)
        write_key_file(self.path, text.encode("utf-8"), what="key-pin file")


def preshared_lookup(secrets: SecretSource) -> Callable[[int], bytes]:
    """A function node id -> secret from a mapping, a callable or a secrets
    file (:func:`secrets_from_file`).

    Raises:
        InvalidTypeError: none of these.
        InvalidArgumentError: an unsafe or malformed secrets file.
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
    if isinstance(secrets, (str, os.PathLike)):
        return preshared_lookup(secrets_from_file(secrets))
    raise InvalidTypeError(
        f"secrets must be None (key agreement), a mapping, a callable or a file, got "
        f"{type(secrets).__name__}")
