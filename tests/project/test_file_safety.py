"""The files cepam writes and reads as its own (cepam._files), treated as
OpenSSH treats its keys: a symbolic link planted at any path the library
writes is refused and its target left untouched; key, secret and pin files
another user owns, or that group or others may write (and, for secrets and
keys, read), are refused; checks run on the open descriptor; new files are
0600 whatever the umask.  Ledger and guard databases refuse links and
others-writable files and warn on group-writable or foreign-owned ones."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import warnings

import numpy as np
import pytest

import cepam
from cepam import _files
from cepam.cli import read_secret_file

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX modes, links and owners")

SECRET = bytes(range(32))
VICTIM_TEXT = b"the victim's own content\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim"
    path.write_bytes(VICTIM_TEXT)
    path.chmod(0o600)
    return path


def _untouched(victim) -> bool:
    return victim.read_bytes() == VICTIM_TEXT and stat.S_IMODE(victim.stat().st_mode) == 0o600


@pytest.fixture
def umask0():
    before = os.umask(0)
    yield
    os.umask(before)


def _private(path, data: bytes, mode: int = 0o600):
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _keys():
    pytest.importorskip("cryptography")
    from cepam.flower import keys

    return keys


def _ledger():
    pytest.importorskip("scipy", reason="cepam.accounting needs scipy")
    from cepam.accounting import Ledger

    return Ledger


# -- every path the library writes: a planted link is refused, its target kept --

def _writers(tmp_path):
    """(name, the path it writes, a call that writes there)."""
    def guard(path):
        return lambda: cepam.ContextGuard(path)

    def encode_with_state(path):
        return lambda: cepam.encode(np.zeros(4, np.float32), cepam.Gaussian(1.0), secret=SECRET,
                                    round=0, client=0, clip=1.0, state=str(path))

    def codec_with_state(path):
        return lambda: cepam.Codec(cepam.Gaussian(1.0), secret=SECRET, clip=1.0,
                                   state=str(path)).encode(np.zeros(4, np.float32), round=0)

    def ledger(path):
        return lambda: _ledger()(path, name="x")

    def pins(path):
        return lambda: _keys().KeyPins(path).pin(101, bytes(32))

    def node_key(path):
        return lambda: _keys().node_key_pair(path)

    out = []
    for name, make in (("guard", guard), ("encode-state", encode_with_state),
                       ("codec-state", codec_with_state), ("ledger", ledger)):
        for suffix in _files.DATABASE_COMPANIONS:
            path = tmp_path / f"{name}.db"
            out.append((f"{name}{suffix or '-db'}", path.with_name(path.name + suffix),
                        make(path)))
    out.append(("pins", tmp_path / "pins.json", pins(tmp_path / "pins.json")))
    out.append(("node-key", tmp_path / "node.key", node_key(tmp_path / "node.key")))
    return out


WRITERS = [f"{db}{suffix or '-db'}" for db in ("guard", "encode-state", "codec-state", "ledger")
           for suffix in _files.DATABASE_COMPANIONS] + ["pins", "node-key"]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
@pytest.mark.parametrize("name", WRITERS)
def test_a_planted_link_at_a_written_path_is_refused(tmp_path, victim, name, dangling):
    (_, link, call), = [w for w in _writers(tmp_path) if w[0] == name]
    target = tmp_path / "not-yet" if dangling else victim
    link.symlink_to(target)
    with pytest.raises(cepam.InvalidArgumentError, match="symbolic link"):
        call()
    assert os.path.islink(link)
    if dangling:
        assert not target.exists()  # nothing created where the link points
    assert _untouched(victim)


def test_the_pins_file_s_old_temporary_name_is_no_longer_followed(tmp_path, victim):
    """KeyPins.pin wrote pins.json.tmp-<pid> with open(..., "w"): a link
    planted there overwrote its target."""
    keys = _keys()
    path = tmp_path / "pins.json"
    os.symlink(victim, f"{path}.tmp-{os.getpid()}")
    keys.KeyPins(path).pin(101, bytes(range(32)))
    assert _untouched(victim)
    assert keys.KeyPins(path).get(101) == bytes(range(32))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["pins.json", f"pins.json.tmp-{os.getpid()}", "victim"])  # no temporary left


@pytest.mark.parametrize("reader", ["secret-file", "secrets-table", "cli", "pins", "node-key"])
def test_a_link_is_refused_where_key_material_is_read(tmp_path, reader):
    keys = _keys()
    real = _private(tmp_path / "real", SECRET if reader == "cli" else
                    b"{}" if reader == "pins" else SECRET.hex().encode() + b"\n")
    link = tmp_path / "link"
    link.symlink_to(real)
    read = {"secret-file": lambda: keys.secret_from_node_config({"cepam-secret-file": str(link)}),
            "secrets-table": lambda: keys.secrets_from_file(link),
            "cli": lambda: read_secret_file(str(link)),
            "pins": lambda: keys.KeyPins(link),
            "node-key": lambda: keys.node_key_pair(link)}[reader]
    with pytest.raises(cepam.InvalidArgumentError, match="symbolic link"):
        read()


# -- owners and modes ----------------------------------------------------------

def _key_readers(tmp_path):
    """(name, file, its valid content, reads it, private)."""
    keys = _keys()
    line = SECRET.hex().encode() + b"\n"
    return [
        ("secret-file", tmp_path / "secret", line,
         lambda p: keys.secret_from_node_config({"cepam-secret-file": str(p)}), True),
        ("secrets-table", tmp_path / "secrets", b"101 " + line,
         keys.secrets_from_file, True),
        ("cli-secret", tmp_path / "raw", SECRET, lambda p: read_secret_file(str(p)), True),
        ("node-key", tmp_path / "node.key", line, keys.node_key_pair, True),
        ("pins", tmp_path / "pins.json", b'{"101": "' + SECRET.hex().encode() + b'"}',
         keys.KeyPins, False),
    ]


READERS = ["secret-file", "secrets-table", "cli-secret", "node-key", "pins"]


@pytest.mark.parametrize("name", READERS)
def test_key_files_of_another_owner_are_refused(tmp_path, monkeypatch, name):
    (_, path, data, read, _), = [r for r in _key_readers(tmp_path) if r[0] == name]
    _private(path, data)
    read(path)  # this user's 0600 file: accepted
    monkeypatch.setattr(os, "getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(cepam.InvalidArgumentError, match="owned by user"):
        read(path)


@pytest.mark.parametrize("mode", [0o666, 0o644, 0o640, 0o620, 0o602, 0o604])
@pytest.mark.parametrize("name", READERS)
def test_key_files_others_may_open_are_refused(tmp_path, name, mode):
    (_, path, data, read, private), = [r for r in _key_readers(tmp_path) if r[0] == name]
    _private(path, data, mode)
    if not private and not mode & 0o022:  # pins are public: readable is fine
        read(path)
        return
    with pytest.raises(cepam.InvalidArgumentError, match=f"mode {mode:04o}"):
        read(path)


def test_the_check_is_on_the_open_descriptor(tmp_path, monkeypatch):
    """The file checked is the file read: a swap between a stat by path and
    the open cannot pass an unsafe file (no stat by path is made)."""
    path = _private(tmp_path / "secret", SECRET.hex().encode())
    seen = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, "stat", lambda *a, **k: pytest.fail("stat by path"))
    monkeypatch.setattr(os, "fstat", lambda fd: seen.append(fd) or real_fstat(fd))
    assert _keys().read_private_file(path) == SECRET.hex()
    assert seen


def test_a_directory_or_fifo_is_not_a_key_file(tmp_path):
    keys = _keys()
    (tmp_path / "dir").mkdir(mode=0o700)
    os.mkfifo(tmp_path / "fifo", 0o600)
    for name in ("dir", "fifo"):  # (a FIFO is refused, not waited on)
        with pytest.raises(cepam.InvalidArgumentError, match="not a regular file"):
            keys.read_private_file(tmp_path / name)
    with pytest.raises(cepam.InvalidArgumentError, match="not a regular file"):
        cepam.ContextGuard(tmp_path / "fifo")


def test_new_files_are_0600_whatever_the_umask(tmp_path, umask0):
    keys = _keys()
    keys.node_key_pair(tmp_path / "node.key")
    keys.KeyPins(tmp_path / "pins.json").pin(1, bytes(32))
    cepam.ContextGuard(tmp_path / "state.db")
    created = ["node.key", "pins.json", "state.db"]
    try:
        _ledger()(tmp_path / "ledger.db", name="x").close()
        created.append("ledger.db")
    except pytest.skip.Exception:
        pass
    for name in created:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))
                  ) == sorted(created)  # no temporary left


def test_a_node_key_is_read_back_not_replaced(tmp_path):
    keys = _keys()
    first = keys.node_key_pair(tmp_path / "node.key")
    assert keys.node_key_pair(tmp_path / "node.key").public == first.public


def test_an_existing_pins_file_is_replaced_atomically_with_mode_0600(tmp_path):
    keys = _keys()
    path = _private(tmp_path / "pins.json", b"{}", 0o644)  # readable: accepted for pins
    pins = keys.KeyPins(path)
    pins.pin(7, bytes(range(32)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert keys.KeyPins(path).get(7) == bytes(range(32))


# -- ledger and guard databases ------------------------------------------------

def _databases():
    return [("guard", lambda p: cepam.ContextGuard(p)),
            ("ledger", lambda p: _ledger()(p, name="x").close())]


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_a_database_others_may_write_is_refused(tmp_path, which):
    (_, open_), = [d for d in _databases() if d[0] == which]
    path = tmp_path / "f.db"
    open_(path)
    path.chmod(0o606)
    with pytest.raises(cepam.InvalidArgumentError, match="anyone on this machine"):
        open_(path)


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_a_database_its_group_may_write_or_another_user_owns_warns(tmp_path, monkeypatch,
                                                                   which):
    (_, open_), = [d for d in _databases() if d[0] == which]
    path = tmp_path / "f.db"
    open_(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_(path)  # 0600, this user's: no warning
    path.chmod(0o660)
    with pytest.warns(cepam.FileSafetyWarning, match="its group may rewrite it"):
        open_(path)
    path.chmod(0o600)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.warns(cepam.FileSafetyWarning, match="owned by user"):
        open_(path)


def test_the_ledger_waits_for_a_locked_file_and_says_so_when_it_cannot(tmp_path):
    Ledger = _ledger()
    from cepam.accounting import GaussianEvent

    path = tmp_path / "privacy.db"
    Ledger(path, name="x").close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another process mid-write
    event = GaussianEvent(noise_multiplier=1.0)
    with Ledger(path, name="x", timeout=0.2) as ledger:  # opening reads: no lock needed
        with pytest.raises(cepam.InvalidArgumentError, match=r"stayed locked by another "
                                                             r"process for more than "
                                                             r"timeout=0.2 s"):
            ledger.record(event, run_id="r", round=0)
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        with Ledger(path, name="x", timeout=30) as ledger:  # waits, then records
            assert ledger.record(event, run_id="r", round=0) == 1
    finally:
        release.join()
        holder.close()


def test_the_guard_waits_for_a_locked_file(tmp_path):
    path = tmp_path / "state.db"
    cepam.ContextGuard(path)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        guard = cepam.ContextGuard(path)  # waits for the lock rather than failing
        guard.claim(SECRET, cepam.Context(1, 2, 3))
        assert guard.is_used(SECRET, cepam.Context(1, 2, 3))
    finally:
        release.join()
        holder.close()


_RACER = """
import os, sys, time
import cepam
which, folder, go, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if which == "guard":
    open_ = cepam.ContextGuard
else:
    from cepam.accounting import Ledger
    open_ = lambda p: Ledger(p, name="x").close()
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.0005)
for i in range(count):
    open_(os.path.join(folder, f"{i}.db"))
"""


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_processes_creating_one_database_at_once_all_open_it(tmp_path, which):
    """A new database is built in a fresh file and linked to its path whole
    (cepam._files.create_database): a process that opens it while another
    creates it never finds it empty (which it would refuse as truncated) or
    half built, and none fails.  Three processes race to create each of 25
    files."""
    import subprocess
    import sys

    if which == "ledger":
        _ledger()  # (skips without scipy)
    go, count = tmp_path / "go", 25
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, which, str(tmp_path), str(go),
                               str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    for p in procs:  # (a racer that failed to start says why)
        assert p.stdout.readline() == "ready\n", p.communicate(timeout=120)[1]
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    for i in range(count):  # each is whole, and no builder's scratch file is left
        _databases_by_name()[which](tmp_path / f"{i}.db")
    assert sorted(f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")) == []


def _databases_by_name():
    return dict(_databases())


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_an_empty_database_file_is_refused_never_started_afresh(tmp_path, which):
    """An emptied (truncated) guard or ledger would count nothing: refused,
    and left as it is; so is an SQLite file of another program."""
    open_ = _databases_by_name()[which]
    path = tmp_path / "f.db"
    open_(path)
    path.write_bytes(b"")
    with pytest.raises((cepam.InvalidArgumentError, cepam.FormatError), match="empty"):
        open_(path)
    assert path.stat().st_size == 0
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()
    before = foreign.read_bytes()
    with pytest.raises((cepam.InvalidArgumentError, cepam.FormatError), match="not a cepam"):
        open_(foreign)
    assert foreign.read_bytes() == before


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_a_log_left_by_a_database_that_is_gone_is_refused_not_replayed(tmp_path, which):
    """A -wal or -journal left at the path of a removed database (its
    process killed, then the file deleted to start afresh) would be replayed
    into a new database by SQLite: its records (spent budget, used contexts)
    would come back.  Creating there is refused, naming the leftover; once
    it is removed the database is created."""
    open_ = _databases_by_name()[which]
    path = tmp_path / "f.db"
    for suffix in ("-wal", "-journal"):
        (tmp_path / f"f.db{suffix}").write_bytes(b"\0" * 4096)
        with pytest.raises(cepam.InvalidArgumentError, match=f"f.db{suffix}.*log"):
            open_(path)
        assert not path.exists()
        (tmp_path / f"f.db{suffix}").unlink()
    open_(path)
    assert path.stat().st_size > 0


def test_a_killed_ledgers_log_does_not_come_back_in_a_new_ledger(tmp_path):
    """The scenario: a server killed with its ledger's log not checkpointed,
    then the ledger file removed to start a new federation."""
    import subprocess
    import sys

    _ledger()
    path = tmp_path / "privacy.db"
    script = ("import os, sys\n"
              "from cepam.accounting import GaussianEvent, Ledger\n"
              "ledger = Ledger(sys.argv[1], name='old')\n"
              "for r in range(20):\n"
              "    ledger.record(GaussianEvent(noise_multiplier=1.0), run_id='a', round=r)\n"
              "os._exit(0)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env)
    assert (tmp_path / "privacy.db-wal").exists()
    path.unlink()
    with pytest.raises(cepam.InvalidArgumentError, match="privacy.db-wal"):
        _ledger()(path, name="new")


class _ReadOnlyFile:
    """A ledger's connection to a file it may not write (which root, who
    runs these tests, could): SQLite takes the write lock, then refuses the
    INSERT, as it does for a 0400 file and another user."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, *args):
        if sql.lstrip().startswith("INSERT"):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self.db, name)


def test_a_ledger_that_cannot_be_written_says_so(tmp_path):
    Ledger = _ledger()
    from cepam.accounting import GaussianEvent

    with Ledger(tmp_path / "privacy.db", name="x") as ledger:
        writable, ledger._conn = ledger._conn, _ReadOnlyFile(ledger._conn)
        with pytest.raises(cepam.InvalidArgumentError, match="cannot write ledger.*readonly"):
            ledger.record(GaussianEvent(noise_multiplier=1.0), run_id="r", round=0)
        ledger._conn = writable  # (nothing was left half done: the transaction rolled back)
        assert ledger.record(GaussianEvent(noise_multiplier=1.0), run_id="r", round=0) == 1


@pytest.mark.parametrize("which", ["guard", "ledger"])
def test_a_database_name_near_the_file_systems_limit_is_created(tmp_path, which):
    """The scratch file a new database is built in has a short name of its
    own (.cepam-*.tmp), not one longer than the database's."""
    path = tmp_path / ("x" * 240 + ".db")
    _databases_by_name()[which](path)
    assert path.stat().st_size > 0
    assert [f.name for f in tmp_path.iterdir()] == [path.name]


def test_a_ledger_path_that_is_no_file_name_is_refused(tmp_path):
    Ledger = _ledger()
    for bad in (str(tmp_path / "a\0b.db"), str(tmp_path / "a\udc80.db")):
        with pytest.raises(cepam.InvalidArgumentError):
            Ledger(bad)
