"""Errors to the server: every exception leaving cepam_mod, cepam's or not,
becomes an error reply holding a type name and a fixed text; its message
(a path, a value of the update, key material) stays in the node's log."""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from flwr.app import ConfigRecord, Message, MessageType, RecordDict  # noqa: E402

import cepam  # noqa: E402
import cepam.flower.mod as mod  # noqa: E402
from cepam.flower import cepam_mod  # noqa: E402

from test_flower_unit import (  # noqa: E402, F401 - task_identity: an autouse fixture
    FakeGrid, contexts, global_arrays, strategy, task_identity, train,
)

SECRET = bytes(range(200, 232))
PRIVATE = "private-detail-9f1c"  # what must never reach the server


def _one_message(st, rnd=1):
    return next(m for m in st.configure_train(rnd, global_arrays(), ConfigRecord(), FakeGrid())
                if m.metadata.dst_node_id == 101)


def _reason(reply: Message) -> str:
    assert reply.has_error() and reply.error.code == mod.ERROR_CODE
    return reply.error.reason


def _fixed(reason: str, type_name: str, stage: str) -> bool:
    return reason == f"cepam_mod: {type_name}: {mod._STAGES[stage]} (the node's log says why)"


def test_a_train_function_s_exception_is_filtered(caplog):
    def failing(msg, ctx):
        raise ValueError(f"sample 17 of {PRIVATE} has label 3")

    ctx = contexts()[101]
    reason = _reason(cepam_mod(_one_message(strategy()), ctx, failing))
    assert _fixed(reason, "ValueError", "training") and PRIVATE not in reason
    assert PRIVATE in caplog.text  # with its traceback, in the node's log


def test_an_evaluate_function_s_exception_is_filtered(caplog):
    def failing(msg, ctx):
        raise KeyError(PRIVATE)

    msg = Message(RecordDict({"arrays": global_arrays()}), dst_node_id=101,
                  message_type=MessageType.EVALUATE)
    reason = _reason(cepam_mod(msg, contexts()[101], failing))
    assert _fixed(reason, "KeyError", "training") and PRIVATE not in reason
    assert PRIVATE in caplog.text


def test_key_material_errors_name_no_path_and_no_value(tmp_path, caplog):
    st = strategy(secrets={101: SECRET})
    unsafe = tmp_path / f"{PRIVATE}.secret"
    unsafe.write_text(SECRET.hex() + "\n")
    unsafe.chmod(0o644)
    for config in ({"cepam-secret-file": str(unsafe)},  # an unsafe file: its path
                   {"cepam-secret": PRIVATE},  # a malformed secret: its value
                   {}):  # none at all
        ctx = contexts(**config)[101]
        reason = _reason(cepam_mod(_one_message(st), ctx, train))
        assert _fixed(reason, "InvalidArgumentError", "keys"), reason
        assert PRIVATE not in reason and str(tmp_path) not in reason
    assert str(unsafe) in caplog.text


def test_a_non_cepam_exception_in_key_agreement_is_filtered(monkeypatch, caplog):
    def leaking(*args, **kwargs):
        raise RuntimeError(f"shared secret {SECRET.hex()}")

    monkeypatch.setattr(mod, "agreed_secret", leaking)
    reason = _reason(cepam_mod(_one_message(strategy()), contexts()[101], train))
    assert _fixed(reason, "RuntimeError", "keys") and SECRET.hex() not in reason


def test_an_unsafe_state_file_is_filtered(tmp_path):
    state = tmp_path / f"{PRIVATE}.db"
    state.symlink_to(tmp_path / "elsewhere.db")
    ctx = contexts(**{"cepam-state": str(state)})[101]
    reason = _reason(cepam_mod(_one_message(strategy()), ctx, train))
    assert _fixed(reason, "InvalidArgumentError", "state") and PRIVATE not in reason
    assert not (tmp_path / "elsewhere.db").exists()


def test_an_encoding_failure_names_no_value(caplog):
    def nan_train(msg, ctx):
        reply = train(msg, ctx)
        w = reply.content["arrays"]["w"].numpy().copy()
        w[3, 2] = np.nan
        reply.content["arrays"]["w"] = type(reply.content["arrays"]["w"])(w)
        return reply

    reason = _reason(cepam_mod(_one_message(strategy()), contexts()[101], nan_train))
    assert _fixed(reason, "InvalidArgumentError", "encoding")  # no value, no position
    assert "NaN" in caplog.text  # the detail stays in the node's log


@pytest.mark.parametrize("refusal", [mod._NoConfiguration, mod._FlowerClipping, mod._Resent,
                                     mod._ReplyMismatch, mod._FloorRefusal, mod._BadFloor,
                                     mod._UnknownKey])
def test_refusals_send_their_class_s_fixed_text(refusal):
    reply = mod._error_reply(_one_message(strategy()), refusal(f"detail {PRIVATE}"), "keys")
    assert _reason(reply) == f"cepam_mod: {refusal.__name__.lstrip('_')}: {refusal.public}"
    assert PRIVATE not in refusal.public


def test_a_context_reuse_recorded_in_the_state_file_says_resent():
    exc = cepam.ContextReuseError(f"round 3 ... recorded in {PRIVATE}")
    reason = _reason(mod._error_reply(_one_message(strategy()), exc, "encoding"))
    assert reason == f"cepam_mod: ContextReuseError: {mod._Resent.public}"
