"""The nodes' keys as the server holds them (a mixin of
:class:`.strategy.CepamStrategy`): pre-shared secrets or X25519 key
agreement with the run's server key pair, the authentication keys the
SuperLink registered (signed keys), the keys pinned for the run and in a pins
file, and the secret a reply is opened with."""

from __future__ import annotations

import logging
import os
from typing import Any

from flwr.app import RecordDict
from flwr.serverapp import Grid

from cepam.errors import InvalidArgumentError, InvalidTypeError

from .identity import auth_fingerprint, node_identity, verify_key_binding
from .keys import KeyPair, KeyPins, SecretSource, agreed_secret, preshared_lookup
from .protocol import CLIENT_KEY, CLIENT_KEY_SIGNATURE, CONFIG_RECORD
from .replies import Dropped

__all__ = ["NodeKeys"]

log = logging.getLogger("flwr.cepam")


class NodeKeys:
    """The keys of the nodes and of the server (see the module)."""

    def _init_keys(self, secrets: SecretSource | None,
                   pinned_keys: str | os.PathLike[str] | None) -> None:
        self._lookup = None if secrets is None else preshared_lookup(secrets)
        self._pins = None if pinned_keys is None else KeyPins(pinned_keys)
        self._server_pair: KeyPair | None = None
        self._pinned: dict[str, bytes] = {}  # this run's, by node identity
        self._accepted: dict[str, int] = {}  # identity -> its last accepted round
        #: Node id -> the authentication public key the SuperLink registered
        #: for it (PEM), as of the round's train messages.
        self._registered: dict[int, bytes] = {}

    def _begin_keys(self) -> None:
        """A fresh server key pair and nothing pinned for the run yet; warns
        when the keys agreed are not authenticated."""
        self._server_pair = KeyPair() if self._lookup is None else None
        self._pinned, self._accepted = {}, {}
        if self._lookup is None and not (self.authenticated_transport or self.signed_keys
                                         or (self._pins is not None and len(self._pins))):
            log.warning(
                "cepam: X25519 KEY AGREEMENT OVER AN UNAUTHENTICATED LINK: the public keys "
                "are not authenticated%s, so an active man in the middle between the SuperLink "
                "and a SuperNode could agree a secret with each side and read every update. "
                "Run Flower with TLS and node authentication and bind the nodes' keys to it "
                "(signed_keys=True, nodes with cepam-auth-key-file), or pass "
                "authenticated_transport=True, or pin the nodes' keys (pinned_keys=, nodes "
                "with cepam-key-file), or use pre-shared secrets.",
                "" if self._pins is None else
                f" (the pins file {self._pins.path!r} holds no key yet: every first key is "
                "trusted on first use)")

    def _pinned_key(self, identity: str) -> bytes | None:
        if identity in self._pinned:
            return self._pinned[identity]
        return None if self._pins is None else self._pins.get(identity)

    def _pin(self, node: int, identity: str, public: bytes) -> None:
        """Pins ``public`` for ``identity`` (an accepted reply's): for the run,
        and in the pins file if any; logs a signed key's identity the first
        time in the run and whenever the node had no accepted reply in the
        round before (a node back from a restart)."""
        last = self._accepted.get(identity)
        self._accepted[identity] = self._round
        if identity.startswith("SHA256:") and (last is None or last < self._round - 1):
            log.info("cepam: round %d: node %d's X25519 key is signed by its registered "
                     "authentication key %s: authenticated%s", self._round, node, identity,
                     "" if last is None else f" (its last accepted reply: round {last})")
        if identity in self._pinned:
            return
        self._pinned[identity] = public
        if self._pins is not None and self._pins.get(identity) is None:
            if not identity.startswith("SHA256:") and not self.authenticated_transport:
                log.warning("cepam: node %d's X25519 key pinned on first use, not "
                            "authenticated (its key is not signed: cepam-auth-key-file)", node)
            self._pins.pin(identity, public)

    def _registered_keys(self, grid: Grid) -> dict[int, bytes]:
        """Node id -> the authentication public key the SuperLink registered
        for it (``grid.get_nodes()``), for the nodes that have one."""
        try:
            return {int(info.node_id): bytes(info.public_key) for info in grid.get_nodes()
                    if info.public_key}
        except Exception as exc:  # a grid without Flower's registry
            if self.signed_keys:
                log.warning("cepam: the grid gives no node registry (%s: %s): no key can be "
                            "checked against a registered authentication key",
                            type(exc).__name__, exc)
            return {}

    def _identity_of(self, node: int, record: Any, public: bytes, run_id: int) -> str:
        """The identity the client's key ``public`` is pinned under: the
        fingerprint of the node's registered authentication key when the key
        is signed by it, else the node id.  Raises Dropped."""
        signature = record.get(CLIENT_KEY_SIGNATURE)
        if signature is None:
            if self.signed_keys:
                raise Dropped("the node's X25519 key is not signed by its authentication key "
                              "(signed_keys=True; the node needs cepam-auth-key-file, the "
                              "file of flower-supernode --auth-supernode-private-key)")
            return node_identity(node)
        registered = self._registered.get(node)
        if registered is None:
            raise Dropped("the node signs its X25519 key, but the SuperLink has no "
                          "authentication key registered for it (flower-superlink "
                          "--enable-supernode-auth, flwr supernode register)")
        assert self._server_pair is not None
        try:
            valid = isinstance(signature, bytes) and verify_key_binding(
                registered, signature, run_id=run_id, server_public=self._server_pair.public,
                client_public=public)
            identity = auth_fingerprint(registered)
        except (InvalidArgumentError, InvalidTypeError) as exc:
            raise Dropped(f"the node's registered authentication key is unusable: {exc}"
                          ) from None
        if not valid:
            raise Dropped(f"the signature on the node's X25519 key does not verify against "
                          f"the authentication key registered for it ({identity})")
        return identity

    def _secret_of(self, node: int, content: RecordDict, run_id: int
                   ) -> tuple[bytes, tuple[str, bytes] | None]:
        """(secret, the identity and client public key to pin on success);
        ``run_id``: the run id of the message the client answered (its secret
        and the key's signature are bound to it; the server's key pair is
        fresh for every run in any case)."""
        if self._lookup is not None:
            try:
                return self._lookup(node), None
            except Exception as exc:
                raise Dropped(f"no pre-shared secret: {exc}") from None
        if CONFIG_RECORD not in content.config_records:
            raise Dropped("no client public key in the reply")
        public = content[CONFIG_RECORD].get(CLIENT_KEY)
        if not isinstance(public, bytes) or len(public) != 32:
            raise Dropped("malformed client public key")
        identity = self._identity_of(node, content[CONFIG_RECORD], public, run_id)
        pinned = self._pinned_key(identity)
        if pinned is not None and pinned != public:
            raise Dropped(f"the node's public key changed (it differs from the key pinned "
                          f"for it, {identity})")
        assert self._server_pair is not None
        try:
            secret = agreed_secret(self._server_pair, public, run_id=run_id,
                                   server_public=self._server_pair.public, client_public=public)
        except InvalidArgumentError as exc:
            raise Dropped(str(exc)) from None
        return secret, (identity, public)
