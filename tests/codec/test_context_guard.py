"""The persistent context guard: a context encoded under one secret is
refused afterwards by every codec, call and process that records in the
same file."""

import json
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cepam
from cepam.keys import Context, guard_fingerprint

from conftest import SECRET_A, SECRET_B

X = np.linspace(-1e-2, 1e-2, 50, dtype=np.float32)
G = cepam.Gaussian(sigma=1e-3)


def test_two_codecs_share_the_record(tmp_path):
    state = tmp_path / "contexts.db"
    first = cepam.Codec(G, secret=SECRET_A, client=3, state=state)
    second = cepam.Codec(G, secret=SECRET_A, client=3, state=str(state))
    first.encode(X, round=0)
    with pytest.raises(cepam.ContextReuseError, match="round 0, client 3, message 0"):
        second.encode(X, round=0)
    second.encode(X, round=0, message=1)
    with pytest.raises(cepam.ContextReuseError):
        first.encode(X, round=0, message=1)
    # without state, a second codec does not know (the in-memory guard)
    assert cepam.Codec(G, secret=SECRET_A, client=3).encode(X, round=0)


def test_module_level_encode_and_codec_share_the_record(tmp_path):
    state = tmp_path / "contexts.db"
    cepam.encode(X, G, secret=SECRET_A, round=4, client=1, state=state)
    with pytest.raises(cepam.ContextReuseError):
        cepam.encode(X, G, secret=SECRET_A, round=4, client=1, state=state)
    with pytest.raises(cepam.ContextReuseError):
        cepam.Codec(G, secret=SECRET_A, client=1, state=state).encode(X, round=4)
    # other secrets and other clients are other contexts
    cepam.encode(X, G, secret=SECRET_B, round=4, client=1, state=state)
    cepam.encode(X, G, secret=SECRET_A, round=4, client=2, state=state)
    guard = cepam.ContextGuard(state)
    assert guard.is_used(SECRET_A, Context(4, 1))
    assert not guard.is_used(SECRET_A, Context(5, 1))


def test_failed_encode_releases_the_context(tmp_path):
    state = tmp_path / "contexts.db"
    codec = cepam.Codec(G, secret=SECRET_A, client=0, state=state)
    bad = X.copy()
    bad[3] = np.nan
    with pytest.raises(cepam.InvalidArgumentError):
        codec.encode(bad, round=0)
    assert not cepam.ContextGuard(state).is_used(SECRET_A, Context(0, 0))
    codec.encode(X, round=0)  # the retry after fixing the input goes through
    with pytest.raises(cepam.ContextReuseError):
        cepam.encode(X, G, secret=SECRET_A, round=0, client=0, state=state)


def test_the_file_holds_no_secret(tmp_path):
    state = tmp_path / "contexts.db"
    cepam.encode(X, G, secret=SECRET_A, round=7, client=9, message=2, state=state)
    with sqlite3.connect(state) as db:
        rows = db.execute("SELECT fingerprint, context FROM used_contexts").fetchall()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert rows == [(guard_fingerprint(SECRET_A), Context(7, 9, 2).pack())]
    assert len(rows[0][0]) == 16 and rows[0][0] not in SECRET_A
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SECRET_A not in raw and SECRET_A[:16] not in raw


def test_a_foreign_file_is_refused(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"not a database, just text " * 100)
    with pytest.raises(cepam.InvalidArgumentError, match="not a cepam context database"):
        cepam.Codec(G, secret=SECRET_A, state=junk)


_WORKER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import cepam
    state, go, out = sys.argv[1:4]
    codec = cepam.Codec(cepam.Gaussian(sigma=1e-3), secret=bytes(range(32)), client=5,
                        state=state)
    print("ready", flush=True)
    while not os.path.exists(go):  # start together, so that the two race
        time.sleep(0.001)
    won = []
    for r in range(40):
        try:
            codec.encode(np.zeros(16, np.float32), round=r)
            won.append(r)
        except cepam.ContextReuseError:
            pass
    with open(out, "w") as f:
        json.dump(won, f)
""")


def test_two_processes_never_encode_the_same_context(tmp_path):
    state, go = tmp_path / "contexts.db", tmp_path / "go"
    outs = [tmp_path / f"won{i}.json" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(state), str(go), str(out)],
                              stdout=subprocess.PIPE, text=True)
             for out in outs]
    for p in procs:  # each has opened the guard (or exited: then the line is empty)
        assert p.stdout.readline() == "ready\n"
    go.touch()
    for p in procs:
        assert p.wait() == 0
    won = [set(json.loads(out.read_text())) for out in outs]
    assert won[0] | won[1] == set(range(40))
    assert not won[0] & won[1]
    with pytest.raises(cepam.ContextReuseError):
        cepam.encode(np.zeros(16, np.float32), G, secret=SECRET_A, round=39, client=5,
                     state=state)


def test_a_record_locked_too_long_is_a_clear_error(tmp_path, monkeypatch):
    import cepam.guard

    state = tmp_path / "contexts.db"
    cepam.ContextGuard(state)
    monkeypatch.setattr(cepam.guard, "_BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(state, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
        with pytest.raises(cepam.InvalidArgumentError, match="cannot record.*locked"):
            cepam.encode(X, G, secret=SECRET_A, round=0, client=0, state=state)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    cepam.encode(X, G, secret=SECRET_A, round=0, client=0, state=state)  # the lock is gone
