"""Opening vault databases: pragmas for durability, migrations, and refusal of damaged files.

A database that cannot be read is reported, never recreated: `open_vault_db`
creates a file only when asked to (`pfar init`), and raises otherwise. A file that
cannot be written (read-only, disk full) is not a damaged one: the two are told
apart by SQLite's result code, and neither message advises a step that loses data.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Self

from ..errors import VaultCorrupt, VaultLocked, VaultMissing, VaultUnwritable
from . import writable
from .driver import sqlite
from .keys import VaultKey, is_plain_sqlite, unlock_path
from .schema import migrate, schema_version

Synchronous = Literal["FULL", "NORMAL"]


# What a database error says about the file, by SQLite's primary result code.
_DAMAGE = frozenset({sqlite.SQLITE_CORRUPT, sqlite.SQLITE_NOTADB})
_UNWRITABLE = frozenset(
    {
        sqlite.SQLITE_READONLY,
        sqlite.SQLITE_CANTOPEN,
        sqlite.SQLITE_PERM,
        sqlite.SQLITE_FULL,
        sqlite.SQLITE_IOERR,
    }
)


class DamagedDatabase(VaultCorrupt, sqlite.DatabaseError):
    """A page of the file is damaged. Also a sqlite3 error, so that every handler that
    rolls a transaction back on a database error still does."""

    code = "vault_corrupt"


class UnwritableDatabase(VaultUnwritable, sqlite.OperationalError):
    """The file cannot be written (read-only, disk full, permission denied). Also a
    sqlite.OperationalError, so the journal writer still stops on it (fail-stop)."""

    code = "vault_unwritable"


def recovery_advice(path: Path) -> str:
    """What to do with a damaged vault file: keep everything, restore or salvage."""
    return (
        f"Stop the kernel, keep a copy of the whole {path.parent} directory, then restore "
        f"it from a backup or salvage the readable rows with `sqlite3 {path} .recover`. "
        "Do not delete the file: it is the only copy of what it holds."
    )


def translate(path: Path, exc: sqlite.Error) -> sqlite.Error:
    """pfar's error for `exc` raised on `path`, naming the file and what to do, or `exc`
    itself when it is not about the file (a constraint, a busy database, a bug)."""
    if isinstance(exc, (DamagedDatabase, UnwritableDatabase)):
        return exc
    code = (exc.sqlite_errorcode or 0) & 0xFF
    if code in _DAMAGE:
        return DamagedDatabase(
            f"{path} is damaged ({exc}); pfar changed nothing in it. {recovery_advice(path)}"
        )
    if code in _UNWRITABLE:
        return unwritable(path, code, str(exc))
    return exc


def unwritable(path: Path, code: int, cause: str) -> UnwritableDatabase:
    return UnwritableDatabase(
        f"pfar cannot write {path} ({cause}): {_why_unwritable(path, code)}. {writable.NOT_DAMAGED}"
    )


def _why_unwritable(path: Path, code: int) -> str:
    directory = path.parent
    if code == sqlite.SQLITE_FULL:
        return writable.full_advice(directory)
    found = writable.why_not(directory)  # the disk, the mount
    if found is not None:
        return found
    if directory.exists() and not os.access(directory, os.W_OK | os.X_OK):
        return (
            f"its directory {directory} is read-only (SQLite writes {path.name}-wal and "
            f"{path.name}-shm next to it); make it writable with `chmod u+w {directory}` "
            "(or check `lsattr -d` and the mount)"
        )
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            return (
                f"{file} is read-only or unreadable to pfar; make it writable with "
                f"`chmod u+rw {file}` (or check `lsattr` and the mount)"
            )
    if code == sqlite.SQLITE_IOERR:
        return writable.IO_ADVICE
    return "permission denied; check the permissions and the mount of the vault directory"


def check_table(conn: sqlite.Connection, path: Path, table: str) -> None:
    """Raise DamagedDatabase when SQLite's integrity check finds `table` damaged.

    For a read that looks inconsistent: a page whose keys were overwritten can still
    parse, so a lookup quietly skips its rows instead of failing (quick_check does
    not notice that; integrity_check compares the rows with their key order)."""
    rows = conn.execute(f"PRAGMA integrity_check({table})").fetchall()
    problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
    if problems:
        more = f"; and {len(problems) - 3} more" if problems[3:] else ""
        shown = "; ".join(problems[:3]) + more
        raise DamagedDatabase(
            f"{path} is damaged (table {table}: {shown}); pfar changed nothing in it. "
            f"{recovery_advice(path)}"
        )


class _Cursor(sqlite.Cursor):
    """Every error a statement meets on the way through the file is translated once,
    here: callers see pfar's error with the file named, never a bare sqlite3 one."""

    def _path(self) -> Path:
        conn = self.connection
        return conn.path if isinstance(conn, VaultConnection) else Path("?")

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        try:
            return super().execute(sql, parameters)
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Self:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite.Error as exc:
            raise translate(self._path(), exc) from exc


class VaultConnection(sqlite.Connection):
    """A connection that knows its file and translates its errors (see _Cursor)."""

    path: Path

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or _Cursor)

    # the cursor is made directly (not through cursor()): these run on every journal read
    # and write, and the extra call showed in the step-commit profile
    def execute(self, sql: str, parameters: Any = (), /) -> _Cursor:
        return _Cursor(self).execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> _Cursor:
        return _Cursor(self).executemany(sql, parameters)


def connect(
    path: Path,
    *,
    key: VaultKey | None = None,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
    factory: type[VaultConnection] = VaultConnection,
) -> sqlite.Connection:
    """A connection with pfar's pragmas. Autocommit mode: transactions are explicit.

    With `key`, SQLCipher encrypts every page of the file and of its WAL with it; the key
    is given before anything else is read, and is checked by the first read.

    A read-only connection to a file on a read-only file system (a home left so after a
    disk error) still reads it: SQLite cannot create the WAL's index there, so when the
    WAL is empty or gone (all of the file's content is in the file) it is opened
    `immutable`, which needs no index. A WAL with frames in it is read as usual, or not
    at all: immutable would skip its frames and show an older vault."""
    try:
        return _connect(path, key=key, synchronous=synchronous, readonly=readonly, factory=factory)
    except UnwritableDatabase:
        if not readonly or not _frozen(path):
            raise
    return _connect(
        path, key=key, synchronous=synchronous, readonly=True, immutable=True, factory=factory
    )


def connect_at_rest(path: Path, *, key: VaultKey | None = None) -> sqlite.Connection:
    """A read-only connection that leaves nothing behind: opened `immutable` (no -wal or
    -shm made) when the file's WAL is gone or empty, so all of its content is in the
    file; read as usual otherwise. For a file nothing else writes meanwhile (a start's
    checks, under the home lock)."""
    wal = Path(f"{path}-wal")
    try:
        empty = wal.stat().st_size == 0
    except FileNotFoundError:
        empty = True
    if empty:
        return _connect(path, key=key, synchronous="FULL", readonly=True, immutable=True)
    return connect(path, key=key, readonly=True)


def _lower(text: object) -> str | None:
    return text.lower() if isinstance(text, str) else None


def _frozen(path: Path) -> bool:
    """`path` is on a read-only file system and its WAL holds nothing."""
    wal = Path(f"{path}-wal")
    try:
        if wal.exists() and wal.stat().st_size > 0:
            return False
    except OSError:
        return False
    return writable.mounted_read_only(path.parent) or (
        writable.write_probe(path.parent) == errno.EROFS
    )


def _connect(
    path: Path,
    *,
    key: VaultKey | None,
    synchronous: Synchronous,
    readonly: bool,
    immutable: bool = False,
    factory: type[VaultConnection] = VaultConnection,
) -> sqlite.Connection:
    uri = f"file:{path}?mode={'ro' if readonly else 'rw'}{'&immutable=1' if immutable else ''}"
    if not readonly and path.exists() and not os.access(path, os.W_OK):
        # SQLite would quietly open it read-only and fail at the first write, much later
        raise unwritable(path, sqlite.SQLITE_READONLY, "the file is not writable")
    try:
        conn = sqlite.connect(
            uri,
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=10.0,
            factory=factory,
        )
    except sqlite.OperationalError as exc:
        if path.exists():
            raise translate(path, exc) from None
        raise VaultMissing(f"{path}: cannot open ({exc})") from None
    assert isinstance(conn, factory)
    conn.path = path
    # case folded as Python folds it: SQLite's lower() knows ASCII letters only (the task
    # list's text filter, journal/sqlite/dialect.py)
    conn.create_function("pfar_lower", 1, _lower, deterministic=True)
    try:
        # SQLCipher's own log goes to stderr ("hmac check failed for pgno=1"): pfar says
        # what a failure means itself, naming the file, so that log stays off
        conn.execute("PRAGMA cipher_log_level = NONE")
        if key is not None:
            conn.execute(f"PRAGMA key = {key.pragma()}")
        conn.execute("PRAGMA busy_timeout = 10000")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise VaultCorrupt(f"{path}: could not switch to WAL (journal_mode={mode})")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Reading the schema touches the header and the first page: a file that
        # is not a database fails here, before anything is written to it.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite.DatabaseError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise VaultLocked(f"{path}: database is locked by another process ({exc})") from None
        cause = exc.__cause__ if isinstance(exc.__cause__, sqlite.Error) else exc
        if isinstance(exc, UnwritableDatabase):
            raise
        if key is not None:
            raise VaultCorrupt(
                f"{path}: not a readable pfar database ({cause}), with the vault's key, which "
                "is the right one (its check value matches): the file is damaged. It was left "
                f"untouched. {recovery_advice(path)}"
            ) from None
        if is_plain_sqlite(path) is False and unlock_path(path.parent).exists():
            raise VaultCorrupt(
                f"{path}: encrypted, and opened without the vault's key (a bug in the caller: "
                "every vault connection is given `keys.unlock(home)`); it was left untouched"
            ) from None
        if is_plain_sqlite(path) is False and not unlock_path(path.parent).exists():
            raise VaultCorrupt(
                f"{path}: not a plain SQLite file ({cause}), and the vault has no "
                f"{unlock_path(path.parent).name}: either the vault is encrypted and that "
                "file was lost (restore it from a backup: it says where the key is), or the "
                f"file is damaged. It was left untouched. {recovery_advice(path)}"
            ) from None
        raise VaultCorrupt(
            f"{path}: not a readable pfar database ({cause}); it was left untouched. "
            f"{recovery_advice(path)}"
        ) from None
    return conn


def open_vault_db(
    path: Path,
    kind: str,
    *,
    key: VaultKey | None = None,
    create: bool = False,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
    factory: type[VaultConnection] = VaultConnection,
) -> sqlite.Connection:
    """Open (and migrate) the vault database `kind` ("sessions", "secrets", "memory"),
    with `key` when the vault is encrypted."""
    if not path.exists():
        if not create:
            raise VaultMissing(
                f"{path} does not exist; run `pfar init` to create a new home "
                "(an existing home whose vault went missing should be restored from backup)"
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch(mode=0o600)
    elif path.stat().st_size == 0:
        raise VaultCorrupt(
            f"{path} is empty: its data is gone (a truncated restore?). It was left as it is; "
            "restore it from a backup (the rest of the vault is untouched: keep it as it is)."
        )
    if key is not None and is_plain_sqlite(path):
        raise VaultCorrupt(
            f"{path} is a plain SQLite file in an encrypted vault: it was put there by hand, "
            "or `pfar vault encrypt` was interrupted. It was left untouched: finish with "
            "`pfar vault encrypt`, or restore the vault from a backup"
        )
    if not create:
        # Look before touching: even switching to WAL would write to a foreign file.
        probe = connect(path, key=key, readonly=True)
        try:
            is_vault = schema_version(probe) > 0
        finally:
            probe.close()
        if not is_vault:
            raise VaultCorrupt(
                f"{path} is a SQLite database but not a pfar {kind} vault (no schema_version "
                "table); it was left untouched"
            )
    conn = connect(path, key=key, synchronous=synchronous, readonly=readonly, factory=factory)
    if not readonly:
        try:
            migrate(conn, kind, path)
        except BaseException:
            conn.close()
            raise
    return conn
