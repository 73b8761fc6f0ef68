"""The files cepam writes and reads as its own, treated as OpenSSH treats
its keys (see docs/guide/security.md, "Files").

Two kinds:

* **Key files** (secrets, X25519 node keys, key pins; small text files read
  whole): opened with ``O_NOFOLLOW`` (a symbolic link at the path is
  refused; a linked directory above it is followed), then checked on the
  open descriptor (``os.fstat``, never a second lookup by path): a regular
  file, owned by the current user, not writable by group or others, and,
  for private ones (secrets, keys), not readable by them either (OpenSSH's
  "UNPROTECTED PRIVATE KEY FILE").  Written to a fresh file in the target's
  directory (``mkstemp``: ``O_EXCL``, mode 0600 set explicitly, whatever
  the umask), flushed to disk and renamed over the target (or linked to it,
  never replacing, for a file created once such as a node key), so a
  reader sees the old or the new file, never a part of one.
* **Database files** (the privacy ledger and the context guard: SQLite,
  which opens them by path itself): a symbolic link at the database path or
  at its ``-wal``, ``-shm`` or ``-journal`` companion is refused (SQLite
  would follow it and write where it points); a new database is built in
  a fresh file (mode 0600) and linked to its path whole, so an existing
  empty file is never one cepam made (a truncated one, whose lost records
  are refused rather than started afresh); an existing one that others
  (outside the owner's group) may write is refused, and one its group may
  write, or that another user owns, is opened with a
  :class:`~cepam.errors.FileSafetyWarning` (a group of servers sharing a
  ledger is a deployment; anyone on the machine rewriting the spent budget
  is not).

Where the platform has no ``os.getuid`` (Windows) ownership is not checked,
and where it has no POSIX modes the mode checks find nothing to refuse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

from .errors import FileSafetyWarning, InvalidArgumentError, NotAFileError

__all__ = ["read_key_file", "read_private_file", "write_key_file", "create_key_file",
           "check_database_file", "create_database", "retry_while_locked"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
_GROUP_OTHERS = stat.S_IRWXG | stat.S_IRWXO
_WRITABLE = stat.S_IWGRP | stat.S_IWOTH
DATABASE_COMPANIONS = ("", "-wal", "-shm", "-journal")
_SCRATCH_PREFIX = ".cepam-"  # a new file's name before it takes its own (short: NAME_MAX)


def _uid() -> int | None:
    """The current user's id, or None where there is none (Windows)."""
    getuid = getattr(os, "getuid", None)
    return None if getuid is None else getuid()


def _link_refusal(what: str, path: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what} {path!r} is a symbolic link: cepam does not follow links for its files "
        "(name the file itself)")


def _refuse_link(path: str, what: str) -> None:
    """Refuses a symbolic link at ``path`` (an absent path is fine)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {what} {path!r}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise _link_refusal(what, path)


def _open_no_follow(path: str, flags: int, what: str, mode: int = 0o600) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (``O_NOFOLLOW``,
    or a check first where the platform has no such flag).  FileNotFoundError
    and FileExistsError propagate; other failures are InvalidArgumentError."""
    if not _NOFOLLOW:
        _refuse_link(path, what)
    try:
        return os.open(path, flags | _NOFOLLOW | _FLAGS, mode)
    except (FileNotFoundError, FileExistsError):
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and _NOFOLLOW):
            raise _link_refusal(what, path) from None
        raise InvalidArgumentError(f"cannot open {what} {path!r}: {exc.strerror}") from None


def _check_key_stat(st: os.stat_result, path: str, what: str, *, private: bool) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(f"{what} {path!r} is not a regular file")
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        raise InvalidArgumentError(
            f"{what} {path!r} is owned by user {st.st_uid}, not by this user ({uid}): "
            "anyone who owns it can change it; refused")
    if os.name != "posix":
        return
    mode = stat.S_IMODE(st.st_mode)
    if private and mode & _GROUP_OTHERS:
        raise InvalidArgumentError(
            f"{what} {path!r} has mode {mode:04o}: group or others may access it "
            f"(an unprotected private key file); chmod 600 {path}")
    if mode & _WRITABLE:
        raise InvalidArgumentError(
            f"{what} {path!r} has mode {mode:04o}: group or others may write it; "
            f"chmod go-w {path}")


def read_key_file(path: str | os.PathLike[str], *, what: str, private: bool = True) -> bytes:
    """The bytes of a key file, checked on its open descriptor.

    Args:
        path: the file.
        what: what it is, for messages ("secret file", "key-pin file", ...).
        private: True for secret material (refused if group or others may
            read it); False for public but trusted material such as key pins
            (refused only if they may write it).

    Raises:
        FileNotFoundError: no file at ``path`` (the caller decides).
        NotAFileError: a directory (or a FIFO, a device) at ``path``: an
            InvalidArgumentError.
        InvalidArgumentError: a symbolic link, owned by another user, or a
            mode that lets group or others in.
    """
    path = os.fspath(path)
    # (O_NONBLOCK: a FIFO planted at the path is refused, not waited on)
    fd = _open_no_follow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), what)
    try:
        _check_key_stat(os.fstat(fd), path, what, private=private)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _sync_directory(directory: str) -> None:
    """Flushes a rename or link in ``directory`` to disk (POSIX; elsewhere
    nothing to do)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | _FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(fd: int, data: bytes, mode: int) -> None:
    """Writes ``data`` to the new file open at ``fd`` (closed after), its
    mode set to ``mode`` explicitly, and flushes it to disk."""
    with os.fdopen(fd, "wb") as f:
        if hasattr(os, "fchmod"):
            os.fchmod(f.fileno(), mode)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_temporary(path: str, data: bytes, mode: int) -> str:
    """A new file (``mkstemp``: ``O_EXCL``) in ``path``'s directory holding
    ``data``, mode ``mode`` set explicitly, flushed to disk; its path."""
    fd, tmp = tempfile.mkstemp(prefix=_SCRATCH_PREFIX, suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        _write_new(fd, data, mode)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def write_key_file(path: str | os.PathLike[str], data: bytes, *, what: str,
                   mode: int = 0o600) -> None:
    """Replaces ``path`` with a file holding ``data`` atomically (a fresh
    file in its directory, flushed, renamed over it; mode ``mode``).

    Raises:
        InvalidArgumentError: a symbolic link at ``path`` (left untouched),
            or the file cannot be written.
    """
    path = os.fspath(path)
    _refuse_link(path, what)  # (a rename replaces a link, never writes through it)
    try:
        tmp = _write_temporary(path, data, mode)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _sync_directory(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise InvalidArgumentError(f"cannot write {what} {path!r}: {exc.strerror}") from None


def create_key_file(path: str | os.PathLike[str], data: bytes, *, what: str,
                    mode: int = 0o600) -> bool:
    """Creates ``path`` holding ``data`` unless something (a file, a
    symbolic link) is there already: a fresh file in its directory, flushed,
    then linked to ``path`` (which never replaces), so a reader never sees
    a part of it.  True if this call created it, False if it was there.

    Raises:
        InvalidArgumentError: the file cannot be written.
    """
    path = os.fspath(path)
    try:
        tmp = _write_temporary(path, data, mode)
        try:
            return _link_new(tmp, path, what=what, mode=mode, data=lambda: data)
        finally:
            with contextlib.suppress(FileNotFoundError):  # (renamed to path)
                os.unlink(tmp)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot write {what} {path!r}: {exc.strerror}") from None


def _link_new(tmp: str, path: str, *, what: str, mode: int, data: Callable[[], bytes]) -> bool:
    """Links the finished file ``tmp`` to ``path`` unless something is
    there (a link never replaces), and flushes the directory; where the
    file system has no hard links, renames ``tmp`` to ``path`` on Windows
    (where a rename never replaces either) and elsewhere creates ``path``
    holding ``data()`` (:func:`_create_exclusive`: a reader may then see it
    empty or in part while it is written).  True if ``path`` was created.
    ``tmp`` is left for the caller to remove (it may be gone)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:  # a file system without hard links
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                             errno.EMLINK, errno.ENOSYS, errno.EINVAL):
            raise
        if os.name != "nt":
            return _create_exclusive(path, data(), what, mode)
        try:  # (Windows' rename never replaces: the file appears whole there too)
            os.rename(tmp, path)
        except FileExistsError:
            return False
    _sync_directory(os.path.dirname(os.path.abspath(path)))
    return True


def create_database(path: str, *, what: str, initialise: Callable[[Any], None]) -> bool:
    """Creates the SQLite database ``path`` whole unless something (a file,
    a symbolic link) is there: ``initialise`` (given an ``sqlite3``
    connection in autocommit mode) builds it in a fresh file, mode 0600, in
    ``path``'s directory (``.cepam-*.tmp``: a process killed meanwhile
    leaves it there), which is flushed and then linked to ``path`` (a link
    never replaces).  So no process ever opens a cepam database empty or
    half built (but on a file system without hard links other than
    Windows', :func:`_link_new`), and an existing empty file is never one
    cepam made (a truncated one, or another program's).  True if this call
    created it.

    Raises:
        InvalidArgumentError: a symbolic link at a companion path (``-wal``,
            ``-shm``, ``-journal``); a log (``-wal``, ``-journal``) left at
            the path of a database that is gone, which SQLite would replay
            into the new one; a missing directory, or a file that cannot be
            written.
    """
    import sqlite3
    from contextlib import closing

    for suffix in DATABASE_COMPANIONS[1:]:
        _refuse_link(path + suffix, f"{what}'s {suffix[1:]} file")
    if os.path.lexists(path):
        return False
    for suffix in ("-wal", "-journal"):
        if os.path.lexists(path + suffix):
            raise InvalidArgumentError(
                f"cannot create {what} {path!r}: {path + suffix!r} is there, the log of a "
                "database at this path that is gone, and a new one would take in its "
                "records; restore the database it belongs to, or remove it")
    try:
        fd, tmp = tempfile.mkstemp(prefix=_SCRATCH_PREFIX, suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(path)))
    except FileNotFoundError:
        raise InvalidArgumentError(f"cannot create {what} {path!r}: its directory does not "
                                   "exist") from None
    except OSError as exc:
        raise InvalidArgumentError(f"cannot create {what} {path!r}: {exc.strerror}") from None
    os.close(fd)
    try:
        try:
            with closing(sqlite3.connect(tmp, isolation_level=None)) as db:
                initialise(db)
            # (closing the last connection checkpoints the log into the file and
            # removes it; a log left means the file is not whole: a full disk)
            if os.path.lexists(tmp + "-wal") or os.path.getsize(tmp) == 0:
                raise InvalidArgumentError(f"cannot create {what} {path!r}: its new database "
                                           "could not be written whole (is the disk full?)")
            fd = os.open(tmp, os.O_RDONLY | _FLAGS)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

            def contents() -> bytes:
                with open(tmp, "rb") as f:
                    return f.read()

            return _link_new(tmp, path, what=what, mode=0o600, data=contents)
        finally:
            for suffix in DATABASE_COMPANIONS:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp + suffix)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot create {what} {path!r}: {exc.strerror}") from None
    except sqlite3.Error as exc:
        raise InvalidArgumentError(f"cannot create {what} {path!r}: {exc}") from None


def _create_exclusive(path: str, data: bytes, what: str, mode: int) -> bool:
    """:func:`create_key_file` without hard links: ``O_CREAT | O_EXCL``
    (which never follows a link) at the path itself."""
    try:
        fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, what, mode)
    except FileExistsError:
        return False
    _write_new(fd, data, mode)
    return True


def check_database_file(path: str, *, what: str) -> bool:
    """Checks an SQLite database path before SQLite opens it, and creates
    the file (empty, mode 0600) if absent.  True if this call created it.

    Raises:
        NotAFileError: not a regular file (a directory, ...): an
            InvalidArgumentError.
        InvalidArgumentError: a symbolic link at the path or at one of its
            companions (``-wal``, ``-shm``, ``-journal``), or a file others
            may write.

    Warns:
        FileSafetyWarning: a file its group may write, or owned by another
            user.
    """
    for suffix in DATABASE_COMPANIONS:
        _refuse_link(path + suffix, what if not suffix else f"{what}'s {suffix[1:]} file")
    try:
        fd = _open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, what)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise InvalidArgumentError(f"cannot open {what} {path!r}: its directory does not "
                                   "exist") from None
    else:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        return True
    try:
        fd = _open_no_follow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), what)
    except FileNotFoundError:  # removed since: SQLite creates it
        return False
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(f"{what} {path!r} is not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if os.name == "posix" and mode & stat.S_IWOTH:
        raise InvalidArgumentError(
            f"{what} {path!r} has mode {mode:04o}: anyone on this machine may rewrite it; "
            f"chmod o-w {path}")
    uid = _uid()
    if os.name == "posix" and mode & stat.S_IWGRP:
        warnings.warn(f"{what} {path!r} has mode {mode:04o}: its group may rewrite it",
                      FileSafetyWarning, stacklevel=3)
    if uid is not None and st.st_uid != uid:
        warnings.warn(f"{what} {path!r} is owned by user {st.st_uid}, not by this user "
                      f"({uid}), who may rewrite it", FileSafetyWarning, stacklevel=3)
    return False


def retry_while_locked(statement: Callable[[], object], *, timeout: float) -> None:
    """Runs ``statement``, again while SQLite says the file is locked or busy
    (for at most ``timeout`` seconds; then the error propagates).  For the
    statements SQLite answers "locked" at once, without its busy handler
    (changing the journal mode, recovering a log a killed process left)."""
    import sqlite3

    deadline = time.monotonic() + timeout
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def is_locked(exc: BaseException) -> bool:
    """Whether an SQLite error says the database is locked or busy."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def read_private_file(path: str | os.PathLike[str]) -> str:
    """The text of a file holding secret material, refused unless only its
    owner may read it: not a symbolic link, owned by the current user, mode
    0600 or stricter (POSIX), checked on the open file (docs/guide/security.md).

    Raises:
        InvalidArgumentError: a missing file, a symbolic link, one another
            user owns, or one group or others may read or write.
    """
    path = os.fspath(path)
    try:
        data = read_key_file(path, what="secret file")
    except FileNotFoundError:
        raise InvalidArgumentError(f"cannot read secret file {path!r}: no such file") from None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"secret file {path!r} is not ASCII text") from None
