"""A durable privacy ledger: every privacy event of a federation, on disk.

An accountant in memory forgets: a server that restarts, or a second
training run on the same clients' data, would count epsilon from zero again.
:class:`Ledger` keeps the events in an SQLite database (the standard
library's ``sqlite3``, write-ahead log, synchronous commits), one
transaction per recorded round, and answers the epsilon of everything it
holds, composed with :class:`~.accountant.PLDAccountant` (privacy loss
distributions), whichever run or process recorded it.

Guarantees:

* a :meth:`Ledger.record` that returned is on disk: killing the process at
  any moment (SIGKILL included) loses no returned record and never leaves the
  database unreadable (SQLite's atomic commit; tested by killing writers);
* nothing is counted twice: an event carries its run and round, and
  recording the same ``(run_id, round)`` again (a retry after a crash)
  returns the first record's id instead of adding one; a record without a
  round (``round=None``) is the run's one round-less record, retried the
  same way;
* only a cepam ledger opens: a new ledger is built in a scratch file and
  linked into place whole, so an existing file that is empty (0 bytes: a
  truncated ledger) or any other file is refused, never initialised, and a
  process opening a ledger that another is creating never finds it empty
  (on file systems with hard links, and Windows'); a log left by a ledger
  that is gone is refused, not replayed into a new one;
* ``max_epsilon``: :meth:`Ledger.record` checks the budget and records
  inside one write transaction, so two servers sharing a ledger cannot both
  spend the last of it;
* the ledger belongs to one named dataset or federation, and to one delta
  (fixed when it is created): opening it under another name is an error.

The events are those of :mod:`.events` that can be rebuilt from their
description: :class:`~.events.CepamGaussianRound`,
:class:`~.events.CepamLaplaceRound` and :class:`~.events.GaussianEvent`.

A server (such as a Flower strategy) uses it as follows::

    ledger = Ledger("privacy.db", name="mnist-federation", delta=1e-5)
    event = CepamGaussianRound(sigma=0.5, setting=setting)
    # before the round: refuse it if it would exceed the budget
    if ledger.epsilon_with([event]) > max_epsilon: ...
    # before the round's result is used: record it (checked again, atomically)
    ledger.record(event, run_id=run, round=r, max_epsilon=max_epsilon)
    ledger.epsilon()        # everything spent, at the ledger's delta

>>> import tempfile, os
>>> from cepam.accounting import FLSetting, CepamGaussianRound
>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
>>> with Ledger(path, name="demo", delta=1e-5) as ledger:
...     for r in range(80):
...         _ = ledger.record(CepamGaussianRound(sigma=0.5, setting=s), run_id="run-1", round=r)
...     round(ledger.epsilon(), 2)
0.31
>>> with Ledger(path, name="demo") as again:     # a restart: the spend is still there
...     len(again.events()), round(again.epsilon(), 2)
(80, 0.31)
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .._files import check_database_file, create_database, is_locked, retry_while_locked
from ..errors import (FormatError, InvalidArgumentError, InvalidTypeError, MissingPathError,
                      PrivacyBudgetError)
from . import _validation as _v
from .accountant import PLDAccountant
from .events import (CepamGaussianRound, CepamLaplaceRound, GaussianEvent,
                     PrivacyEvent, check_one_relation, relation_and_level)
from .client_level import ClientLevelRound
from .cohort import COHORT_TAIL
from .setting import THREAT_MODELS, FLSetting

__all__ = ["Ledger", "LedgerEntry", "DEFAULT_DELTA"]

DEFAULT_DELTA = 1e-5
_SCHEMA = 1
_APPLICATION_ID = 0x4345504C  # "CEPL": marks the file as a cepam ledger
_MAX_INDEX = 2**62  # the largest round index or round count a record takes

_CREATE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    round INTEGER,
    rounds INTEGER NOT NULL CHECK (rounds >= 1),
    mechanism TEXT NOT NULL,
    bound TEXT,
    scale REAL,
    clip REAL,
    event TEXT NOT NULL,
    time REAL NOT NULL,
    UNIQUE (run_id, round)
);
"""


def _initialise(db: sqlite3.Connection, *, name: str, delta: float | None) -> None:
    """Builds a new, empty ledger for ``name`` at ``delta`` (None:
    :data:`DEFAULT_DELTA`) on the connection ``db`` (a fresh file of
    :func:`cepam._files.create_database`): write-ahead log, cepam's
    application id, the tables and the ledger's metadata."""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
    db.execute("BEGIN")
    for statement in _CREATE.split(";"):
        if statement.strip():
            db.execute(statement)
    meta = {"schema": str(_SCHEMA), "name": name,
            "delta": repr(DEFAULT_DELTA if delta is None else delta),
            "created": repr(time.time())}
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    db.execute("COMMIT")


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded privacy event.

    Attributes:
        id: the record's id (increasing in recording order).
        run_id: the training run that spent it.
        round: the run's round index, or None.
        rounds: how many rounds of ``event`` it stands for (>= 1).
        event: the event (rebuilt from its description).
        time: when it was recorded (seconds since the epoch, UTC).
    """

    id: int
    run_id: str
    round: int | None
    rounds: int
    event: PrivacyEvent
    time: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the fields, with the event's description."""
        return {"id": self.id, "run_id": self.run_id, "round": self.round,
                "rounds": self.rounds, "time": self.time, **self.event.describe()}


def _setting(d: dict[str, Any]) -> FLSetting:
    # Ledgers written before the rename store samples_per_round as "local_steps".
    samples = d["samples_per_round"] if "samples_per_round" in d else d["local_steps"]
    return FLSetting(clip=d["clip"], clients=d["clients"], samples_per_round=samples,
                     dataset_size=d["dataset_size"], threat_model=d["threat_model"])


def _event_from(description: dict[str, Any]) -> PrivacyEvent:
    kind = description.get("event")
    if kind == "cepam_gaussian_round":
        return CepamGaussianRound(sigma=description["sigma"], setting=_setting(description),
                                  bound=description["bound"])
    if kind == "cepam_laplace_round":
        return CepamLaplaceRound(scale=description["scale"], setting=_setting(description),
                                 dimension=description["dimension"], bound=description["bound"])
    if kind == "gaussian":
        return GaussianEvent(noise_multiplier=description["noise_multiplier"])
    if kind == "client_level_round":
        return ClientLevelRound(sigma=description["sigma"], clip=description["clip"],
                                clients=description["clients"],
                                threat_model=description["threat_model"],
                                sample_rate=description.get("sample_rate", 1.0),
                                relation=description.get("relation", "replace-one"),
                                sampling=description.get("sampling", "poisson"),
                                count_sigma=description.get("count_sigma"),
                                cohort_tail=description.get("cohort_tail", COHORT_TAIL))
    raise FormatError(f"ledger holds an event of unknown kind {kind!r}")


def _same_description(stored: str, text: str) -> bool:
    """Whether the stored description ``stored`` rebuilds to the event that
    ``text`` describes (False if it does not rebuild)."""
    try:
        event = _event_from(json.loads(stored))
    except (ValueError, KeyError, TypeError):
        return False
    return json.dumps(event.describe(), sort_keys=True) == text


def _check_run_id(run_id: object) -> str:
    """``run_id``, a run's name: a non-empty str that UTF-8 can encode (SQLite
    stores text as UTF-8; a lone surrogate such as ``"\\ud800"`` is none).

    Raises:
        InvalidTypeError: it is not a str.
        InvalidArgumentError: it is empty or not encodable.
    """
    if not isinstance(run_id, str):
        raise InvalidTypeError(f"run_id must be a non-empty string, got {type(run_id).__name__}")
    if not run_id:
        raise InvalidArgumentError("run_id must be a non-empty string")
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"run_id must be encodable text, got {run_id!r}") from None
    return run_id


def _check_event(event: object) -> dict[str, Any]:
    if not isinstance(event, (CepamGaussianRound, CepamLaplaceRound, GaussianEvent,
                              ClientLevelRound)):
        raise InvalidTypeError(
            "a ledger records CepamGaussianRound, CepamLaplaceRound, GaussianEvent or "
            "ClientLevelRound "
            f"(events it can rebuild from their description), got {type(event).__name__}")
    return event.describe()


def _weakest(described: Iterable[dict[str, Any]]) -> str | None:
    """The weakest threat model the described events name (None if none
    does): each round's bound holds against its own view and every weaker
    one (a view is a function of the stronger's), so their composition holds
    against the weakest recorded only."""
    threats = {d["threat_model"] for d in described if "threat_model" in d}
    return min(threats, key=THREAT_MODELS.index) if threats else None


def _terms(events: Iterable[PrivacyEvent]) -> str:
    """What an epsilon over ``events`` is stated for, in words: their
    neighbouring relation, level and threat model (e.g. "replace-one
    neighbours, sample level, client threat model"); "" for no events."""
    events = list(events)
    described = [e.describe() for e in events]
    if not described:
        return ""
    kinds = [relation_and_level(e) for e in events]
    relations = sorted({relation for relation, _ in kinds} - {None}) or ["the caller's"]
    levels = sorted({level for _, level in kinds})
    threats = {d["threat_model"] for d in described if "threat_model" in d}
    terms = [f"{' and '.join(relations)} neighbours", " and ".join(levels)]
    weakest = _weakest(described)
    if weakest is not None:
        terms.append(f"{weakest} threat model" + ("" if len(threats) == 1 else
                     f" (the weakest of the {' and '.join(sorted(threats))} recorded: the eps "
                     "holds against it only)"))
    return ", ".join(terms)


class Ledger:
    """The privacy spent on one dataset or federation, in an SQLite file.

    Args:
        path: the database file (created if missing and ``create``).
        name: the dataset or federation it accounts for; stored when the
            ledger is created (default: the file's stem) and checked when it
            is opened again.
        delta: the ledger's delta, stored when it is created (default
            :data:`DEFAULT_DELTA`) and checked when given on reopening:
            :meth:`epsilon` answers at it unless told otherwise.
        create: False to open an existing ledger only.
        timeout: seconds to wait for another writer's lock.

    Raises:
        MissingPathError: a missing file (or an empty path) with
            ``create=False`` (an InvalidArgumentError).
        cepam.errors.NotAFileError: a directory or another thing that is
            not a regular file at the path (an InvalidArgumentError).
        InvalidArgumentError: a name or delta other than the ledger's; bad
            arguments; a file another process keeps locked for longer than
            ``timeout``; a symbolic link at the path (or its ``-wal``,
            ``-shm``, ``-journal``), or a file others may write
            (docs/guide/security.md).
        FormatError: the file is not a cepam ledger.

    Warns:
        FileSafetyWarning: a file its group may write, or another user owns.
    """

    def __init__(self, path: str | os.PathLike[str], *, name: str | None = None,
                 delta: float | None = None, create: bool = True,
                 timeout: float = 60.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"path must be a str or path, got {type(path).__name__}")
        self._path = Path(path)
        self._lock = threading.RLock()
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidArgumentError("name must be a non-empty string")
        if not isinstance(create, bool):
            raise InvalidTypeError(f"create must be True or False, got {type(create).__name__}")
        if delta is not None:
            delta = _v.probability_open("delta", delta)
        timeout = _v.positive("timeout", timeout)
        if not os.fspath(path):  # (Path("") is ".", the current directory)
            if not create:
                raise MissingPathError("no ledger at '' (an empty path)")
            raise InvalidArgumentError("a ledger's path must not be empty")
        stored_name = name or self._path.stem
        try:
            os.fsencode(self._path), stored_name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"the ledger's path and name must be encodable text, got "
                                       f"{str(self._path)!r} and {stored_name!r}") from None
        if "\0" in str(self._path):
            raise InvalidArgumentError(f"a ledger's path must not hold a NUL byte, got "
                                       f"{str(self._path)!r}")
        if not create and not os.path.lexists(self._path):
            raise MissingPathError(f"no ledger at {str(self._path)!r}")
        # A ledger file is created here whole (built in a fresh file, mode
        # 0600, then linked to the path), never adopted: an existing empty
        # file (which SQLite would take as a new database) is not a ledger,
        # and no process ever sees one this call is building.
        created = create and create_database(
            str(self._path), what="ledger",
            initialise=lambda db: _initialise(db, name=stored_name, delta=delta))
        check_database_file(str(self._path), what="ledger")
        if not created and self._path.stat().st_size == 0:
            raise FormatError(f"{str(self._path)!r} is an empty file, not a cepam ledger")
        self._timeout = timeout
        self._closed = False
        try:
            # One connection, usable from any thread (a server's callbacks may
            # run on several), its use serialised by self._lock.
            self._conn = sqlite3.connect(str(self._path), timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise InvalidArgumentError(f"cannot open ledger {str(self._path)!r}: {exc}") from None
        try:
            self._open(name, delta)
        except sqlite3.OperationalError as exc:  # locked past the timeout, read-only, ...
            self._conn.close()
            if is_locked(exc):
                raise self._stayed_locked(exc) from None
            raise FormatError(f"{str(self._path)!r} is not a cepam ledger ({exc})") from None
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise FormatError(f"{str(self._path)!r} is not a cepam ledger ({exc})") from None
        except BaseException:
            self._conn.close()
            raise

    def _stayed_locked(self, exc: sqlite3.OperationalError) -> InvalidArgumentError:
        """The error for a lock another process held past the timeout."""
        return InvalidArgumentError(
            f"ledger {str(self._path)!r} stayed locked by another process for more than "
            f"timeout={self._timeout:g} s ({exc})")

    def _open(self, name: str | None, delta: float | None) -> None:
        db = self._db
        # SQLite answers "locked" at once, without waiting, while another
        # process recovers the log of a killed one (and to a change of
        # journal mode while another holds the file): wait for it here, as
        # cepam.ContextGuard does.  Another program's file is not switched to WAL.
        found: list[int] = []
        retry_while_locked(lambda: found.append(db.execute("PRAGMA application_id").fetchone()[0]),
                           timeout=self._timeout)
        if found[-1] != _APPLICATION_ID:
            raise FormatError(f"{str(self._path)!r} is an SQLite file but not a cepam ledger")
        retry_while_locked(lambda: db.execute("PRAGMA journal_mode=WAL"), timeout=self._timeout)
        db.execute("PRAGMA synchronous=FULL")  # a returned commit survives power loss too
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != str(_SCHEMA):
            raise FormatError(f"ledger schema {meta.get('schema')!r} is not {_SCHEMA}")
        try:
            self._name, self._delta = meta["name"], float(meta["delta"])
            _v.probability_open("delta", self._delta)
            db.execute("SELECT id, run_id, round, rounds, event, time FROM events LIMIT 1")
        except (KeyError, ValueError, sqlite3.DatabaseError) as exc:
            raise FormatError(f"{str(self._path)!r} is a damaged cepam ledger ({exc})") from None
        if name is not None and name != self._name:
            raise InvalidArgumentError(
                f"ledger {str(self._path)!r} accounts for {self._name!r}, not {name!r}")
        if delta is not None and delta != self._delta:
            raise InvalidArgumentError(
                f"ledger {str(self._path)!r} has delta {self._delta!r}, not {delta!r}")

    @property
    def path(self) -> Path:
        return self._path

    @property
    def name(self) -> str:
        """The dataset or federation the ledger accounts for."""
        return self._name

    @property
    def delta(self) -> float:
        """The ledger's delta (fixed at creation)."""
        return self._delta

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection; InvalidArgumentError once the ledger is closed."""
        if self._closed:
            raise InvalidArgumentError(f"ledger {str(self._path)!r} is closed")
        return self._conn

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        """The rows of a read query; FormatError where the file's tables are
        not a ledger's (altered since it was opened)."""
        with self._lock:
            try:
                return self._db.execute(query).fetchall()
            except sqlite3.DatabaseError as exc:
                raise FormatError(f"ledger {str(self._path)!r} is unreadable ({exc})") from None

    def close(self) -> None:
        """Closes the database (records already returned are on disk); any
        later use raises InvalidArgumentError."""
        with self._lock:
            self._conn.close()
            self._closed = True

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self._path)!r}, name={self._name!r}, delta={self._delta!r})"

    # -- writing ---------------------------------------------------------------

    def record(self, event: PrivacyEvent, *, run_id: str, round: int | None = None,
               rounds: int = 1, max_epsilon: float | None = None) -> int:
        """Records ``rounds`` rounds of ``event`` in one transaction; returns its id.

        Args:
            event: a :class:`~.events.CepamGaussianRound`,
                :class:`~.events.CepamLaplaceRound`,
                :class:`~.events.GaussianEvent` or (client-level)
                :class:`~.client_level.ClientLevelRound`; a ledger holds
                sample-level or client-level rounds, not both.
            run_id: the training run spending it (non-empty string).
            round: the run's round index (>= 0), or None for the run's one
                round-less record (a whole run recorded at once, with
                ``rounds``).  A ``(run_id, round)`` already recorded with
                the same event is not recorded again, None included: its id
                is returned (a retry after a crash).
            rounds: how many rounds of the event this record stands for.
            max_epsilon: if given, the record is refused (nothing written)
                when the epsilon at the ledger's delta of everything
                recorded plus it would exceed this budget; checked inside
                the write transaction.

        Raises:
            PrivacyBudgetError: the budget would be exceeded.
            InvalidArgumentError: the ``(run_id, round)`` was recorded with a
                different event; bad arguments; another process kept the
                file locked for longer than the ledger's ``timeout``, or it
                cannot be written (read-only).
            InvalidTypeError: an event the ledger cannot store, or a
                ``run_id`` that is not a str.
        """
        description = _check_event(event)
        run_id = _check_run_id(run_id)
        if round is not None:
            round = _v.integer("round", round, minimum=0)
        rounds = _v.integer("rounds", rounds)
        if (round or 0) > _MAX_INDEX or rounds > _MAX_INDEX:  # (SQLite's integers are 64-bit)
            raise InvalidArgumentError(f"round and rounds must be at most {_MAX_INDEX}, got "
                                       f"{round} and {rounds}")
        if max_epsilon is not None:
            max_epsilon = _v.nonnegative("max_epsilon", max_epsilon)
        text = json.dumps(description, sort_keys=True)
        with self._lock:
            return self._insert(event, description, text, run_id, round, rounds, max_epsilon)

    def _insert(self, event: PrivacyEvent, description: dict[str, Any], text: str, run_id: str,
                round: int | None, rounds: int, max_epsilon: float | None) -> int:
        try:
            return self._insert_in_transaction(event, description, text, run_id, round,
                                               rounds, max_epsilon)
        except sqlite3.OperationalError as exc:  # (the transaction is rolled back)
            if is_locked(exc):  # (SQLite waited for it up to the timeout)
                raise self._stayed_locked(exc) from None
            raise InvalidArgumentError(f"cannot write ledger {str(self._path)!r}: {exc}") from None

    def _insert_in_transaction(self, event: PrivacyEvent, description: dict[str, Any], text: str,
                               run_id: str, round: int | None, rounds: int,
                               max_epsilon: float | None) -> int:
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # the write lock: check and insert as one
        try:
            row = db.execute("SELECT id, event, rounds FROM events WHERE run_id = ? AND round IS ?",
                             (run_id, round)).fetchone()
            if row is not None:
                # (a record written before a rename reads back as its event does now)
                same = row[1] == text or _same_description(row[1], text)
                if not same or row[2] != rounds:
                    raise InvalidArgumentError(
                        f"{'the round-less record' if round is None else f'round {round}'} of "
                        f"run {run_id!r} is already recorded with another event")
                db.execute("ROLLBACK")
                return int(row[0])
            totals = self._totals()
            check_one_relation([*(e for e, _ in totals), event], what="a ledger")
            if max_epsilon is not None:
                spent = self._epsilon_of([*totals, (event, rounds)], self._delta)
                if spent > max_epsilon:
                    raise PrivacyBudgetError(
                        f"ledger {self._name!r}: recording this would bring epsilon to "
                        f"{spent:.6g} at delta {self._delta:g} "
                        f"({_terms([*(e for e, _ in totals), event])}), "
                        f"above max_epsilon={max_epsilon:g}")
            cursor = db.execute(
                "INSERT INTO events (run_id, round, rounds, mechanism, bound, scale, clip, event, time)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, round, rounds, description["event"], description.get("bound"),
                 description.get("sigma", description.get("scale")), description.get("clip"),
                 text, time.time()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # (SQLite may have rolled back already)
                db.execute("ROLLBACK")
            raise
        return int(cursor.lastrowid)

    # -- reading ---------------------------------------------------------------

    @staticmethod
    def _parse(id_: int, text: str) -> PrivacyEvent:
        try:
            return _event_from(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FormatError(f"ledger record {id_} is unreadable ({exc})") from None

    def _load(self) -> list[LedgerEntry]:
        rows = self._rows("SELECT id, run_id, round, rounds, event, time FROM events ORDER BY id")
        return [LedgerEntry(id_, run_id, rnd, rounds, self._parse(id_, text), when)
                for id_, run_id, rnd, rounds, text, when in rows]

    def _totals(self) -> list[tuple[PrivacyEvent, int]]:
        # Each distinct recorded event once, with its rounds summed: all that
        # composition and the relation check need, parsed once per distinct
        # event, not once per record (a record costs the same at round 10^5
        # as at round 10).
        rows = self._rows("SELECT min(id), event, sum(rounds) FROM events"
                          " GROUP BY event ORDER BY min(id)")
        return [(self._parse(id_, text), int(total)) for id_, text, total in rows]

    def check(self, event: PrivacyEvent) -> None:
        """Checks that ``event`` can join what the ledger holds (one
        neighbouring relation, one level), recording nothing: a run's check
        before its first round.

        Raises:
            InvalidArgumentError: it would mix relations or levels.
            InvalidTypeError: an event the ledger cannot store.
        """
        _check_event(event)
        check_one_relation([*(e for e, _ in self._totals()), event], what="a ledger")

    def totals(self) -> list[tuple[PrivacyEvent, int]]:
        """Each distinct recorded event with its rounds summed, in order of
        its first record (all that composing them needs)."""
        return self._totals()

    def weakest_threat_model(self) -> str | None:
        """The weakest threat model among the recorded events (the one their
        composed eps holds against), or None when none names one."""
        return _weakest(event.describe() for event, _ in self._totals())

    def events(self, *, run_id: str | None = None) -> list[LedgerEntry]:
        """The recorded events in recording order (of one run, if given).

        Raises:
            InvalidTypeError: a ``run_id`` that is neither None nor a str.
            InvalidArgumentError: an empty or unencodable ``run_id``.
        """
        if run_id is not None:
            run_id = _check_run_id(run_id)
        entries = self._load()
        if run_id is not None:
            entries = [e for e in entries if e.run_id == run_id]
        return entries

    def runs(self) -> list[str]:
        """The runs that recorded events, in order of their first record."""
        rows = self._rows("SELECT run_id FROM events GROUP BY run_id ORDER BY min(id)")
        return [r[0] for r in rows]

    @staticmethod
    def _epsilon_of(totals: Iterable[tuple[PrivacyEvent, int]], delta: float) -> float:
        # Identical events compose as one self-composition (fast and exact).
        totals = list(totals)
        check_one_relation([e for e, _ in totals], what="a ledger")
        counts: dict[str, tuple[PrivacyEvent, int]] = {}
        for event, rounds in totals:
            key = json.dumps(event.describe(), sort_keys=True)
            prev = counts.get(key)
            counts[key] = (event, rounds + (prev[1] if prev else 0))
        if not counts:
            return 0.0
        accountant = PLDAccountant()
        for key in sorted(counts):
            accountant.compose(*counts[key])
        return accountant.get_epsilon(delta)

    def epsilon(self, *, delta: float | None = None) -> float:
        """Epsilon of everything recorded, at ``delta`` (default: the
        ledger's); ``math.inf`` if none is certified.

        Raises:
            InvalidArgumentError: delta outside (0, 1).
        """
        delta = self._delta if delta is None else _v.probability_open("delta", delta)
        return self._epsilon_of(self._totals(), delta)

    def epsilon_with(self, events: Iterable[PrivacyEvent | tuple[PrivacyEvent, int]], *,
                     delta: float | None = None) -> float:
        """Epsilon if ``events`` (events, or ``(event, rounds)`` pairs) were
        recorded too: the check before a round runs.  Records nothing.

        Raises:
            InvalidTypeError, InvalidArgumentError: bad events or delta.
        """
        delta = self._delta if delta is None else _v.probability_open("delta", delta)
        if not isinstance(events, Iterable) or isinstance(events, (str, bytes)):
            raise InvalidTypeError(f"events must be an iterable of events or (event, rounds) "
                                   f"pairs, got {type(events).__name__}")
        extra = []
        for item in events:
            if isinstance(item, tuple) and len(item) != 2:
                raise InvalidArgumentError(f"an (event, rounds) pair has 2 items, got {item!r}")
            event, rounds = item if isinstance(item, tuple) else (item, 1)
            _check_event(event)
            extra.append((event, _v.integer("rounds", rounds)))
        return self._epsilon_of([*self._totals(), *extra], delta)

    def report(self, *, delta: float | None = None) -> dict[str, Any]:
        """The ledger as a JSON-friendly dict: name, delta, total
        ``epsilon`` at it (None if not finite), what it is stated for
        (``terms``: the events' neighbouring relation, level and threat
        model, in words; "" for an empty ledger), runs, rounds and events."""
        delta = self._delta if delta is None else _v.probability_open("delta", delta)
        entries = self._load()
        totals = self._totals()
        eps = self._epsilon_of(totals, delta)
        return {"name": self._name, "path": str(self._path), "delta": delta,
                "epsilon": eps if math.isfinite(eps) else None,
                "terms": _terms(e for e, _ in totals),
                "rounds": sum(e.rounds for e in entries),
                "runs": list(dict.fromkeys(e.run_id for e in entries)),
                "events": [e.as_dict() for e in entries]}
