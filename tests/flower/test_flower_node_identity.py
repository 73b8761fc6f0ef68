"""X25519 keys bound to Flower's node identity (issue 40): a node signs its
key with its Flower authentication key (``cepam-auth-key-file``), the server
checks the signature against the key the SuperLink registered for the node
(``grid.get_nodes()``), pins by the key's fingerprint, and warns whenever
nothing authenticates the keys.  Messages built by hand as in
test_flower_unit.py; examples/flower/deploy_local.sh runs it on a real
SuperLink with ``flwr supernode register``."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess

import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import serialization as s  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519  # noqa: E402
from flwr.app import Context, RecordDict  # noqa: E402
from flwr.proto.node_pb2 import NodeInfo  # noqa: E402
from flwr.supercore.primitives.asymmetric import public_key_to_bytes  # noqa: E402

from cepam.errors import FormatError, InvalidArgumentError, InvalidTypeError  # noqa: E402
from cepam.flower import cepam_mod  # noqa: E402
from cepam.flower.identity import (  # noqa: E402
    auth_fingerprint, binding_message, load_auth_private_key, load_auth_public_key,
    node_identity, sign_key_binding, verify_key_binding,
)
from cepam.flower.keys import KeyPins  # noqa: E402
from test_flower_unit import (  # noqa: E402,F401 (task_identity: an autouse fixture)
    NODES, RUN, FakeGrid, run_round, strategy, task_identity,
)

SERVER, CLIENT = bytes(range(32)), bytes(range(32, 64))


class RegistryGrid(FakeGrid):
    """A grid whose node registry holds each node's authentication public
    key as Flower's SuperLink does (PEM SubjectPublicKeyInfo)."""

    def __init__(self, registered):
        super().__init__(list(registered))
        self.registered = registered

    def get_nodes(self):
        return [NodeInfo(node_id=n, public_key=public_key_to_bytes(k.public_key()))
                for n, k in self.registered.items()]


def write_auth_key(path, key=None, mode=0o600):
    """An OpenSSH private key file as ``ssh-keygen -t ecdsa -b 384`` writes
    it (what flower-supernode --auth-supernode-private-key takes)."""
    key = ec.generate_private_key(ec.SECP384R1()) if key is None else key
    path.write_bytes(key.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH,
                                       s.NoEncryption()))
    os.chmod(path, mode)
    return key


def node_contexts(tmp_path, ids=NODES, keys=None, signed=True):
    """Node contexts with a persistent X25519 key each and, if ``signed``,
    an authentication key file; returns (contexts, {node: auth key})."""
    keys = {} if keys is None else keys
    ctxs = {}
    for n in ids:
        name = keys.get(n, (None, f"n{n}"))[1]
        config = {"cepam-key-file": str(tmp_path / f"{name}.x25519")}
        if signed:
            path = tmp_path / f"{name}.auth"
            if n not in keys:
                keys[n] = (write_auth_key(path), name)
            config["cepam-auth-key-file"] = str(path)
        ctxs[n] = Context(run_id=RUN, node_id=n, node_config=config, state=RecordDict(),
                          run_config={})
    return ctxs, keys


def registry(keys):
    return {n: k for n, (k, _) in keys.items()}


# ------------------------------------------------------------ the signature


def test_signature_accepts_the_bound_key_and_refuses_anything_else():
    key = ec.generate_private_key(ec.SECP384R1())
    registered = public_key_to_bytes(key.public_key())  # as Flower's registry holds it
    sig = sign_key_binding(key, run_id=RUN, server_public=SERVER, client_public=CLIENT)
    ok = dict(run_id=RUN, server_public=SERVER, client_public=CLIENT)
    assert verify_key_binding(registered, sig, **ok)
    assert verify_key_binding(key.public_key(), sig, **ok)
    # A substituted X25519 key, another server key, another run: refused.
    assert not verify_key_binding(registered, sig, **{**ok, "client_public": bytes(32)})
    assert not verify_key_binding(registered, sig, **{**ok, "server_public": CLIENT})
    assert not verify_key_binding(registered, sig, **{**ok, "run_id": RUN + 1})
    # A wrong signature: another signer, a flipped byte, garbage.
    other = ec.generate_private_key(ec.SECP384R1())
    assert not verify_key_binding(registered, sign_key_binding(other, **ok), **ok)
    assert not verify_key_binding(registered, sig[:-1] + bytes([sig[-1] ^ 1]), **ok)
    assert not verify_key_binding(registered, b"", **ok)
    assert not verify_key_binding(registered, bytes(72), **ok)


def test_fingerprint_is_the_one_ssh_keygen_prints(tmp_path):
    key = write_auth_key(tmp_path / "node")
    openssh = key.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH)
    (tmp_path / "node.pub").write_bytes(openssh + b"\n")
    pem = public_key_to_bytes(key.public_key())
    fingerprint = auth_fingerprint(pem)
    assert fingerprint.startswith("SHA256:") and len(fingerprint) == 50
    assert fingerprint == auth_fingerprint(openssh) == auth_fingerprint(key.public_key())
    assert load_auth_private_key(tmp_path / "node").private_numbers() == key.private_numbers()
    if shutil.which("ssh-keygen"):
        out = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "node.pub")],
                             capture_output=True, text=True, check=True, timeout=30).stdout
        assert out.split()[1] == fingerprint


def test_key_files_and_arguments_are_checked(tmp_path):
    loose = tmp_path / "loose"
    write_auth_key(loose, mode=0o644)
    with pytest.raises(InvalidArgumentError, match="chmod 600"):
        load_auth_private_key(loose)
    edwards = tmp_path / "ed25519"
    edwards.write_bytes(ed25519.Ed25519PrivateKey.generate().private_bytes(
        s.Encoding.PEM, s.PrivateFormat.OpenSSH, s.NoEncryption()))
    os.chmod(edwards, 0o600)
    with pytest.raises(InvalidArgumentError, match="not an unencrypted EC private key"):
        load_auth_private_key(edwards)
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        load_auth_private_key(tmp_path / "missing")
    with pytest.raises(InvalidTypeError):
        load_auth_private_key(3)
    with pytest.raises(InvalidArgumentError, match="not an EC public key"):
        load_auth_public_key(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    with pytest.raises(InvalidTypeError):
        load_auth_public_key(1.5)
    key = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(InvalidArgumentError, match="32-byte"):
        sign_key_binding(key, run_id=RUN, server_public=SERVER, client_public=CLIENT[:31])
    with pytest.raises(InvalidTypeError, match="run_id"):
        binding_message(run_id=True, server_public=SERVER, client_public=CLIENT)
    with pytest.raises(InvalidTypeError, match="client_public"):
        binding_message(run_id=RUN, server_public=SERVER, client_public="ab" * 16)
    with pytest.raises(InvalidTypeError, match="EC private key"):
        sign_key_binding(b"key", run_id=RUN, server_public=SERVER, client_public=CLIENT)
    with pytest.raises(InvalidTypeError, match="signature"):
        verify_key_binding(key.public_key(), "sig", run_id=RUN, server_public=SERVER,
                           client_public=CLIENT)
    assert node_identity(7) == "7" and node_identity("12") == "12"
    for bad in (-1, "node-7", "SHA256:short", 1.0, True):
        with pytest.raises((InvalidArgumentError, InvalidTypeError)):
            node_identity(bad)
    (tmp_path / "pins.json").write_text(json.dumps({"node-7": "00" * 32}))
    with pytest.raises(FormatError):
        KeyPins(tmp_path / "pins.json")
    with pytest.raises(InvalidTypeError, match="signed_keys"):
        strategy(signed_keys=1)
    with pytest.raises(InvalidArgumentError, match="secrets=None"):
        strategy(signed_keys=True, secrets={n: bytes(32) for n in NODES})


# ------------------------------------------------------------ the strategy


def test_signed_keys_are_authenticated_against_the_registry(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="flwr.cepam")
    ctxs, keys = node_contexts(tmp_path)
    st = strategy(signed_keys=True)
    _, replies = run_round(st, ctxs, grid=RegistryGrid(registry(keys)))
    assert all(set(r.content["cepam"]) == {"client-key", "client-key-signature"}
               for r in replies)
    _, metrics = st.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 4 and metrics["cepam-dropped"] == 0
    for n, (key, _) in keys.items():
        assert f"round 1: node {n}'s X25519 key is signed by its registered authentication key " \
               f"{auth_fingerprint(key.public_key())}: authenticated" in caplog.text
    assert "UNAUTHENTICATED" not in caplog.text


def test_a_substituted_key_a_wrong_signer_or_no_signature_is_dropped(tmp_path, caplog):
    ctxs, keys = node_contexts(tmp_path)
    registered = registry(keys)
    registered[102] = ec.generate_private_key(ec.SECP384R1())  # 102 signs with another key
    del ctxs[103].node_config["cepam-auth-key-file"]  # 103 does not sign
    st = strategy(signed_keys=True)
    _, replies = run_round(st, ctxs, grid=RegistryGrid(registered))
    # A man in the middle puts his own X25519 key in 101's reply.
    (mitm,) = [r for r in replies if r.metadata.src_node_id == 101]
    mitm.content["cepam"]["client-key"] = bytes(range(1, 33))
    st.aggregate_train(1, replies)  # 1 accepted: fewer than 2, nothing released
    assert [n for n in NODES if f"dropped the reply of node {n}:" in caplog.text] == [
        101, 102, 103]
    assert caplog.text.count("does not verify against the authentication key") == 2
    assert "not signed by its authentication key" in caplog.text


def test_a_signed_key_without_a_registered_key_is_dropped(tmp_path, caplog):
    ctxs, keys = node_contexts(tmp_path)
    st = strategy()  # signed_keys=False: a signature is still checked
    _, replies = run_round(st, ctxs)  # a grid without a registry
    assert st.aggregate_train(1, replies) == (None, None)  # nothing released
    assert caplog.text.count("no authentication key registered for it") == 4


def test_pins_keyed_by_identity_survive_a_new_node_id(tmp_path, caplog):
    pins = tmp_path / "pins.json"
    ctxs, keys = node_contexts(tmp_path)
    first = strategy(signed_keys=True, pinned_keys=pins)
    _, replies = run_round(first, ctxs, grid=RegistryGrid(registry(keys)))
    assert first.aggregate_train(1, replies)[1]["cepam-updates"] == 4
    fingerprints = {auth_fingerprint(k.public_key()) for k, _ in keys.values()}
    assert set(json.loads(pins.read_text())) == fingerprints
    # Node 101 comes back as node 201 (a new Flower node id), with its
    # authentication key and its X25519 key file: the same pin accepts it.
    keys[201] = keys.pop(101)
    ctxs, keys = node_contexts(tmp_path, ids=[201, 102, 103, 104], keys=keys)
    second = strategy(signed_keys=True, pinned_keys=pins)
    _, replies = run_round(second, ctxs, grid=RegistryGrid(registry(keys)))
    assert second.aggregate_train(1, replies)[1]["cepam-updates"] == 4
    assert set(json.loads(pins.read_text())) == fingerprints  # 4 pins for 4 nodes
    # Its X25519 key replaced (the key file lost): the identity's pin refuses it.
    os.unlink(ctxs[201].node_config["cepam-key-file"])
    third = strategy(signed_keys=True, pinned_keys=pins)
    _, replies = run_round(third, ctxs, grid=RegistryGrid(registry(keys)))
    _, metrics = third.aggregate_train(1, replies)
    assert metrics["cepam-updates"] == 3
    assert f"public key changed (it differs from the key pinned for it, " \
           f"{auth_fingerprint(keys[201][0].public_key())})" in caplog.text


def test_unsigned_pins_stay_keyed_by_node_id(tmp_path, caplog):
    pins = tmp_path / "pins.json"
    ctxs, _ = node_contexts(tmp_path, signed=False)
    st = strategy(pinned_keys=pins)
    _, replies = run_round(st, ctxs)
    assert st.aggregate_train(1, replies)[1]["cepam-updates"] == 4
    assert sorted(json.loads(pins.read_text())) == [str(n) for n in NODES]
    assert caplog.text.count("pinned on first use, not authenticated") == 4


def test_the_warning_whenever_nothing_authenticates_the_keys(tmp_path, caplog):
    pins = tmp_path / "pins.json"
    strategy(pinned_keys=pins)._begin_run(FakeGrid())  # no pins file yet
    assert "UNAUTHENTICATED" in caplog.text and "holds no key yet" in caplog.text
    caplog.clear()
    pins.write_text("{}")  # an empty pins file
    strategy(pinned_keys=pins)._begin_run(FakeGrid())
    assert "UNAUTHENTICATED" in caplog.text and "holds no key yet" in caplog.text
    caplog.clear()
    pins.write_text(json.dumps({"101": "11" * 32}))
    strategy(pinned_keys=pins)._begin_run(FakeGrid())
    assert "UNAUTHENTICATED" not in caplog.text
    strategy(signed_keys=True)._begin_run(FakeGrid())
    assert "UNAUTHENTICATED" not in caplog.text


def test_the_mod_refuses_an_unusable_auth_key_file(tmp_path):
    ctxs, _ = node_contexts(tmp_path)
    os.chmod(ctxs[101].node_config["cepam-auth-key-file"], 0o644)  # others may read it
    _, replies = run_round(strategy(signed_keys=True), ctxs)
    (reply,) = [r for r in replies if r.metadata.dst_node_id == 101 or
                r.metadata.src_node_id == 101]
    assert reply.has_error()
    assert all(not r.has_error() for r in replies if r is not reply)
