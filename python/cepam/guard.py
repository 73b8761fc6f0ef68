"""A persistent guard against encoding two messages under one context.

Two payloads encoded under the same ``(round, client, message)`` and secret
are two releases of one client in one round, which the accountant counts as
one.  (Their dithers, latent scales and keystreams differ: each payload has
its own nonce, format version 8; before it, they shared them, so their
noises were dependent.)  :class:`cepam.Codec`
remembers the contexts it encoded, in memory: a second ``Codec`` for the same
client, module-level :func:`cepam.encode`, a restarted process or a second
worker do not see them.  A :class:`ContextGuard` records them in an SQLite
file (``Codec(..., state=PATH)``, ``cepam.encode(..., state=PATH)``) shared
by every codec, thread and process that opens the same file.

A context is *claimed* before it is encoded, in one atomic insert, so two
processes racing for it cannot both win; if encoding then fails (bad input),
the claim is withdrawn, since no payload left the encoder.  The file holds,
per claim, a 16-byte fingerprint of the secret (:func:`cepam.keys.
guard_fingerprint`, one-way) and the context: never the secret.

The file uses SQLite's write-ahead log, so it must be on a local file system
(SQLite's locking is unreliable on network file systems).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing

from ._files import check_database_file, create_database, retry_while_locked
from .errors import ContextReuseError, InvalidArgumentError, InvalidTypeError
from .keys import Context, check_context, guard_fingerprint

__all__ = ["ContextGuard"]

_SCHEMA_VERSION = 1
_APPLICATION_ID = 0x43455047  # "CEPG": a cepam context database (files before it: 0)
_BUSY_TIMEOUT_S = 60.0


def _initialise(db: sqlite3.Connection) -> None:
    """Builds a new, empty context database on the connection ``db`` (a
    fresh file of :func:`cepam._files.create_database`): write-ahead log,
    the table, the schema version and cepam's application id."""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE used_contexts (fingerprint BLOB NOT NULL, context BLOB NOT NULL, "
               "PRIMARY KEY (fingerprint, context)) WITHOUT ROWID")
    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
    db.execute(f"PRAGMA application_id = {_APPLICATION_ID}")


def _row(secret: object, context: object) -> tuple[bytes, bytes]:
    """The record of ``context`` under ``secret``: the secret's one-way
    fingerprint and the packed context, both checked."""
    packed = check_context(context).pack()
    return guard_fingerprint(secret), packed  # type: ignore[arg-type]


class ContextGuard:
    """Records used ``(round, client, message)`` contexts per secret in an
    SQLite file.

    Args:
        path: the database file (created, whole, if absent; its
            directory must exist).  Every codec that encodes for one client under one
            secret, in any process, must name the same file.

    Raises:
        InvalidTypeError: path is not a str or os.PathLike.
        InvalidArgumentError: an in-memory or empty path, or a file that
            cannot be opened or is not a cepam context database (an
            existing empty file included: cepam creates its state files
            whole, so an empty one is a truncated record); a symbolic
            link at the path (or its ``-wal``, ``-shm``, ``-journal``), or
            a file others may write (docs/guide/security.md).

    Warns:
        FileSafetyWarning: a file its group may write, or another user owns.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"state must be a path (str or os.PathLike), "
                                   f"got {type(path).__name__}")
        try:
            path = os.fspath(path)
        except TypeError:  # (an __fspath__ that returns neither str nor bytes)
            raise InvalidTypeError(f"state's __fspath__ must return a str, got "
                                   f"{type(path.__fspath__()).__name__}") from None
        if not isinstance(path, str) or path in ("", ":memory:") or path.startswith("file:"):
            raise InvalidArgumentError(
                f"state must name a file, got {path!r}: an in-memory record guards nothing "
                "that Codec does not already")
        if "\0" in path:
            raise InvalidArgumentError(f"state must name a file, got {path!r} (a NUL byte)")
        self.path = os.path.abspath(path)
        created = create_database(self.path, what="state file", initialise=_initialise)
        with self._connect() as db:
            if not created and os.path.getsize(self.path) == 0:
                raise InvalidArgumentError(
                    f"state file {self.path!r} is empty (0 bytes), so not a cepam context "
                    "database: cepam creates its state files whole, so an empty one is a "
                    "truncated record (its contexts could be encoded twice) or another "
                    "program's file; remove it to start a new record, or name a path that "
                    "does not exist")
            found: dict[str, int] = {}

            def read() -> None:  # (a log a killed process left: "locked" until recovered)
                for name in ("user_version", "application_id"):
                    found[name] = db.execute(f"PRAGMA {name}").fetchone()[0]
                found["tables"] = db.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                    "AND name = 'used_contexts'").fetchone()[0]

            try:
                retry_while_locked(read, timeout=_BUSY_TIMEOUT_S)
            except sqlite3.OperationalError as exc:  # locked past the timeout, unreadable, ...
                raise InvalidArgumentError(
                    f"cannot open state file {self.path!r}: {exc}") from None
            except sqlite3.DatabaseError as exc:
                raise InvalidArgumentError(
                    f"state file {self.path!r} is not a cepam context database: {exc}") from None
            if found["application_id"] not in (0, _APPLICATION_ID) or not found["tables"]:
                raise InvalidArgumentError(f"state file {self.path!r} is an SQLite file but "
                                           "not a cepam context database")
            if found["user_version"] != _SCHEMA_VERSION:
                raise InvalidArgumentError(
                    f"state file {self.path!r} has schema version {found['user_version']}, "
                    f"this cepam reads {_SCHEMA_VERSION}")

    def __repr__(self) -> str:
        return f"ContextGuard({self.path!r})"

    def _connect(self) -> closing[sqlite3.Connection]:
        # At every connection: SQLite opens by path, and would follow a link
        # planted since (cepam._files: links refused, a new file 0600).
        check_database_file(self.path, what="state file")
        try:
            db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise InvalidArgumentError(f"cannot open state file {self.path!r}: {exc}") from None
        return closing(db)

    def claim(self, secret: bytes, context: Context) -> None:
        """Records ``context`` as used under ``secret``.

        Raises:
            ContextReuseError: it was already recorded (by anyone using
                this file).
            InvalidTypeError: ``context`` is not a :class:`~cepam.Context`,
                or ``secret`` not bytes (InvalidArgumentError: not 32 bytes).
            InvalidArgumentError: the file cannot be written (read-only,
                or locked for longer than a minute).
        """
        row = _row(secret, context)
        with self._connect() as db:
            try:
                db.execute("INSERT INTO used_contexts VALUES (?, ?)", row)
            except sqlite3.IntegrityError:
                raise ContextReuseError(
                    f"round {context.round}, client {context.client}, message "
                    f"{context.message} was already encoded under this secret (recorded in "
                    f"{self.path}): a second payload of a round is a release the accountant "
                    f"does not count") from None
            except sqlite3.Error as exc:  # read-only file, lock held past the timeout, ...
                raise InvalidArgumentError(
                    f"cannot record the context in state file {self.path!r}: {exc}") from None

    def release(self, secret: bytes, context: Context) -> None:
        """Withdraws a claim whose encoding failed (no payload was produced).

        Raises:
            InvalidArgumentError: the file cannot be written (read-only, or
                locked for longer than a minute), or ``secret`` is not 32
                bytes.
            InvalidTypeError: ``context`` is not a :class:`~cepam.Context`,
                or ``secret`` not bytes.
        """
        with self._connect() as db:
            try:
                db.execute("DELETE FROM used_contexts WHERE fingerprint = ? AND context = ?",
                           _row(secret, context))
            except sqlite3.Error as exc:
                raise InvalidArgumentError(
                    f"cannot withdraw the claim in state file {self.path!r}: {exc}") from None

    def is_used(self, secret: bytes, context: Context) -> bool:
        """Whether ``context`` is recorded as used under ``secret``.

        Raises:
            InvalidArgumentError: the file cannot be read (locked for longer
                than a minute, damaged), or ``secret`` is not 32 bytes.
            InvalidTypeError: ``context`` is not a :class:`~cepam.Context`,
                or ``secret`` not bytes.
        """
        with self._connect() as db:
            try:
                return db.execute(
                    "SELECT 1 FROM used_contexts WHERE fingerprint = ? AND context = ?",
                    _row(secret, context)).fetchone() is not None
            except sqlite3.Error as exc:
                raise InvalidArgumentError(
                    f"cannot read state file {self.path!r}: {exc}") from None
