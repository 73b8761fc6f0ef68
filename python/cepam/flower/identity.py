"""Keys bound to Flower's node identity.

With Flower's node authentication (``flower-superlink
--enable-supernode-auth``; each SuperNode's ECDSA public key registered with
``flwr supernode register``, the node started with
``--auth-supernode-private-key``), a node that names the same private key
file in its node config, ``cepam-auth-key-file`` (:data:`AUTH_KEY_FILE_KEY`),
signs its X25519 public key with it (:mod:`cepam.flower.keys`): ECDSA-SHA256
over :func:`binding_message` (:data:`BINDING_SALT`, the run id, the server's
and the client's X25519 public keys).  The server checks the signature
against the public key the SuperLink registered for the node
(``grid.get_nodes()``, Flower's registry), so the key agreement is
authenticated without trust on first use, and
``CepamStrategy(signed_keys=True)`` drops every reply whose key is not so
signed.  A node's identity is then its authentication key's fingerprint
(:func:`auth_fingerprint`, as ``ssh-keygen -lf`` prints it), which a
restart does not change; pins (:class:`cepam.flower.keys.KeyPins`) are keyed
by it (:func:`node_identity`).  The server's X25519 key reaches the node
over the TLS link Flower's node authentication requires (the SuperNode
checks the SuperLink's certificate).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import struct
from typing import Any

from cepam._files import read_private_file
from cepam.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["AUTH_KEY_FILE_KEY", "BINDING_SALT", "load_auth_private_key", "load_auth_public_key",
           "auth_fingerprint", "binding_message", "sign_key_binding", "verify_key_binding",
           "node_identity"]

#: Node-config key: the SuperNode's authentication private key (the file
#: given to ``flower-supernode --auth-supernode-private-key``).
AUTH_KEY_FILE_KEY = "cepam-auth-key-file"
#: Prefix of the message a node signs to bind its X25519 key to its identity.
BINDING_SALT = b"cepam/flower/x25519-binding/v1"


def _asymmetric(name: str, needs: str) -> Any:
    """``cryptography``'s ``hazmat.primitives.asymmetric.<name>`` module,
    imported when first needed (cryptography is an extra).

    Raises:
        ImportError: cryptography is not installed: ``needs`` (what needs
            it), then how to install it.
    """
    try:
        return importlib.import_module(f"cryptography.hazmat.primitives.asymmetric.{name}")
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(f"{needs}: pip install \"cepam[flower]\"") from None


def _ec() -> Any:
    return _asymmetric("ec", "node keys need cryptography")


def load_auth_private_key(path: str | os.PathLike[str]) -> Any:
    """The node's authentication private key: the unencrypted EC key file
    given to ``flower-supernode --auth-supernode-private-key`` (OpenSSH
    format, as ``ssh-keygen -t ecdsa`` writes it, or PEM; mode 0600).

    Returns:
        A ``cryptography`` ``EllipticCurvePrivateKey``.

    Raises:
        InvalidTypeError: ``path`` is not a path.
        InvalidArgumentError: a missing or unsafe file, or not an unencrypted
            EC private key.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"the authentication key file must be a path, got "
                               f"{type(path).__name__}")
    ec = _ec()
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization as s

    data = read_private_file(path).encode("ascii")
    key = None
    for load in (s.load_ssh_private_key, s.load_pem_private_key):
        try:
            key = load(data, None)
            break
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise InvalidArgumentError(
            f"{os.fspath(path)!r} is not an unencrypted EC private key (OpenSSH or PEM), "
            "as flower-supernode --auth-supernode-private-key takes")
    return key


def load_auth_public_key(key: Any) -> Any:
    """A node's authentication public key from the bytes Flower's registry
    holds (``NodeInfo.public_key``: PEM SubjectPublicKeyInfo), an OpenSSH
    ``.pub`` line (as given to ``flwr supernode register``), DER, or a
    ``cryptography`` EC public key.

    Returns:
        A ``cryptography`` ``EllipticCurvePublicKey``.

    Raises:
        InvalidTypeError: not bytes, str or an EC public key.
        InvalidArgumentError: not an EC public key in one of these forms.
    """
    ec = _ec()
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key
    if isinstance(key, str):
        key = key.encode("ascii", "replace")
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"an authentication public key is bytes, got "
                               f"{type(key).__name__}")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization as s

    data = bytes(key)
    for load in (s.load_pem_public_key, s.load_ssh_public_key, s.load_der_public_key):
        try:
            public = load(data)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
        if isinstance(public, ec.EllipticCurvePublicKey):
            return public
    raise InvalidArgumentError("not an EC public key (PEM, OpenSSH or DER)")


def auth_fingerprint(key: Any) -> str:
    """A node's identity: the fingerprint of its authentication public key,
    ``SHA256:<base64>`` as ``ssh-keygen -lf node.pub`` prints it (the
    SHA-256 of the key's OpenSSH encoding).

    Args:
        key: the public key in any form :func:`load_auth_public_key` reads.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`load_auth_public_key`.
    """
    from cryptography.hazmat.primitives import serialization as s

    line = load_auth_public_key(key).public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def binding_message(*, run_id: int, server_public: bytes, client_public: bytes) -> bytes:
    """What a node signs to bind its X25519 key to its identity for one run:
    :data:`BINDING_SALT`, the run id (8 bytes, little-endian), the server's
    and the client's X25519 public keys (32 bytes each).

    Raises:
        InvalidTypeError: a run id that is not an int, or keys that are not bytes.
        InvalidArgumentError: a key that is not 32 bytes.
    """
    if isinstance(run_id, bool) or not isinstance(run_id, int):
        raise InvalidTypeError(f"run_id must be an int, got {type(run_id).__name__}")
    keys = []
    for name, value in (("server_public", server_public), ("client_public", client_public)):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidTypeError(f"{name} must be bytes, got {type(value).__name__}")
        if len(bytes(value)) != 32:
            raise InvalidArgumentError(f"{name} must be a 32-byte X25519 public key, got "
                                       f"{len(bytes(value))} bytes")
        keys.append(bytes(value))
    return BINDING_SALT + struct.pack("<Q", run_id % (1 << 64)) + keys[0] + keys[1]


def sign_key_binding(auth_private: Any, *, run_id: int, server_public: bytes,
                     client_public: bytes) -> bytes:
    """The node's signature binding its X25519 key ``client_public`` to its
    authentication key for the run (ECDSA with SHA-256, DER-encoded, as
    Flower signs with the same key).

    Args:
        auth_private: the node's EC private key (:func:`load_auth_private_key`).

    Raises:
        InvalidTypeError: ``auth_private`` is not an EC private key, or as
            :func:`binding_message`.
        InvalidArgumentError: as :func:`binding_message`.
    """
    ec = _ec()
    if not isinstance(auth_private, ec.EllipticCurvePrivateKey):
        raise InvalidTypeError(f"auth_private must be an EC private key, got "
                               f"{type(auth_private).__name__}")
    from cryptography.hazmat.primitives import hashes

    message = binding_message(run_id=run_id, server_public=server_public,
                              client_public=client_public)
    return auth_private.sign(message, ec.ECDSA(hashes.SHA256()))


def verify_key_binding(auth_public: Any, signature: bytes, *, run_id: int,
                       server_public: bytes, client_public: bytes) -> bool:
    """Whether ``signature`` is the signature of :func:`sign_key_binding` by
    the private half of ``auth_public`` on ``client_public`` for this run and
    server key.

    Args:
        auth_public: the node's registered authentication public key, in any
            form :func:`load_auth_public_key` reads.
        signature: the DER-encoded ECDSA signature the node sent.

    Returns:
        True if it verifies; False for any other signature (a substituted
        X25519 key, another run or server key, another signer, garbage).

    Raises:
        InvalidTypeError, InvalidArgumentError: a malformed ``auth_public``, a
            signature that is not bytes, or as :func:`binding_message`.
    """
    ec = _ec()
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes

    public = load_auth_public_key(auth_public)
    if not isinstance(signature, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"signature must be bytes, got {type(signature).__name__}")
    message = binding_message(run_id=run_id, server_public=server_public,
                              client_public=client_public)
    try:
        public.verify(bytes(signature), message, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def node_identity(node: int | str) -> str:
    """The key a node's pin is filed under (:class:`KeyPins`): an
    authentication key's fingerprint (``SHA256:...``, :func:`auth_fingerprint`)
    for a node whose X25519 key is signed, else its Flower node id as digits
    (which a restarted SuperNode without node authentication does not keep).

    Raises:
        InvalidTypeError: neither an int nor a str.
        InvalidArgumentError: a negative node id, or a str that is neither
            digits nor ``SHA256:<base64>``.
    """
    if isinstance(node, bool) or not isinstance(node, (int, str)):
        raise InvalidTypeError(f"a node identity is a node id or a fingerprint, got "
                               f"{type(node).__name__}")
    if isinstance(node, int):
        if node < 0:
            raise InvalidArgumentError(f"a node id is non-negative, got {node}")
        return str(node)
    if node.isdigit() or (node.startswith("SHA256:") and len(node) == 50):
        return node
    raise InvalidArgumentError(f"not a node id or a SHA256: fingerprint: {node!r}")
