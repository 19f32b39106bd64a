"""Moving one vault file under a new key, the old copy kept until the new one is proved.

`pfar vault encrypt` (a plain file to an encrypted one) and `pfar vault rekey` (one key
to another) do the same thing to each database: SQLCipher's `sqlcipher_export` writes
every table, index, trigger and `sqlite_sequence` row into a new file beside it,
`X.db.<suffix>`, under the new key, in one transaction; the new file is synced, then
opened again with its key and checked (`quick_check`, `cipher_integrity_check`, the
same schema, the same row count in every table, the same `sqlite_sequence`); only then
are the old file's `-wal` and `-shm` removed (its WAL was checkpointed into it first,
and is checked empty, so nothing is lost with it; left there, SQLite would apply the
old file's frames to the new file) and the new file renamed over the old one, and the
directory synced. A run killed at any point leaves the old file whole, or the new one
in its place: a leftover `X.db.<suffix>` is removed and made again by the next run.

Not `PRAGMA rekey`: SQLCipher 4.12 does rekey a WAL database (every page rewritten in
one transaction into the WAL, the file itself only at the next checkpoint), but in
place, so there is no moment at which the new copy can be checked while the old one is
still there, and it cannot encrypt a plain file, which this must do anyway.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import VaultCorrupt, VaultError, VaultLocked
from .driver import sqlite
from .durable import fsync_dir
from .home import Home
from .keys import VaultKey

# Test-only: `PFAR_FAULT=encrypt:POINT` (or `rekey:POINT`) SIGKILLs the command right
# after POINT the first time it is passed, `encrypt:POINT:KIND` after POINT for the
# database KIND ("sessions", "secrets", "memory"), as setup_home.py does for init.
FAULT_ENV = "PFAR_FAULT"
Operation = Literal["encrypt", "rekey"]
FILE_POINTS = ("checkpointed", "exported", "synced", "verified", "wal_removed", "renamed")


@dataclass(frozen=True, slots=True)
class VaultFile:
    kind: str  # "sessions", "secrets", "memory"
    path: Path


def vault_files(home: Home) -> list[VaultFile]:
    return [
        VaultFile("sessions", home.sessions_db),
        VaultFile("secrets", home.secrets_db),
        VaultFile("memory", home.memory_db),
    ]


@dataclass(frozen=True, slots=True)
class Contents:
    """What a copy must have to be the same database: its schema, each table's row
    count, its sqlite_sequence (the high-water marks of AUTOINCREMENT ids) and the
    header values sqlcipher_export does not copy."""

    schema: frozenset[tuple[str, str, str, str | None]]
    rows: dict[str, int]
    sequence: frozenset[tuple[str, int]]
    user_version: int
    application_id: int


def contents(conn: sqlite.Connection, schema: str = "main") -> Contents:
    master = conn.execute(
        f"SELECT type, name, tbl_name, sql FROM {schema}.sqlite_master"
    ).fetchall()
    tables = sorted(str(r[1]) for r in master if r[0] == "table")
    rows = {
        t: int(conn.execute(f'SELECT count(*) FROM {schema}."{_ident(t)}"').fetchone()[0])
        for t in tables
    }
    sequence: frozenset[tuple[str, int]] = frozenset()
    if "sqlite_sequence" in tables:
        sequence = frozenset(
            (str(n), int(s))
            for n, s in conn.execute(f"SELECT name, seq FROM {schema}.sqlite_sequence")
        )
    return Contents(
        schema=frozenset((str(a), str(b), str(c), d) for a, b, c, d in master),
        rows=rows,
        sequence=sequence,
        user_version=int(conn.execute(f"PRAGMA {schema}.user_version").fetchone()[0]),
        application_id=int(conn.execute(f"PRAGMA {schema}.application_id").fetchone()[0]),
    )


def _ident(name: str) -> str:
    return name.replace('"', '""')


def staging_path(path: Path, operation: Operation) -> Path:
    return path.with_name(f"{path.name}.{'encrypting' if operation == 'encrypt' else 'rekeying'}")


def remove_staging(path: Path, operation: Operation) -> bool:
    """Remove what a killed run left of its new copy of `path` (never the file itself);
    True when there was something."""
    staged = staging_path(path, operation)
    found = False
    for leftover in (
        staged,
        Path(f"{staged}-wal"),
        Path(f"{staged}-shm"),
        Path(f"{staged}-journal"),
    ):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
            found = True
    return found


def open_with(
    path: Path, key: VaultKey | None, *, readonly: bool = False, immutable: bool = False
) -> sqlite.Connection:
    """A bare connection to `path` under `key` (None: plain), its first page read: a
    wrong key fails here (SQLITE_NOTADB). `immutable`: read-only, and no -wal or -shm
    is looked at or made (only for a file no process has open and no WAL beside)."""
    mode = "ro&immutable=1" if immutable else "ro" if readonly else "rw"
    conn = sqlite.connect(
        f"file:{path}?mode={mode}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=10.0,
    )
    try:
        # SQLCipher writes a line to stderr for each page that fails its HMAC: trying a
        # key that is not the file's is expected here (a rekey looks for which key a
        # file has), and the caller says what it means
        conn.execute("PRAGMA cipher_log = off")
        if key is not None:
            conn.execute(f"PRAGMA key = {key.pragma()}")
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def check_readable(path: Path, key: VaultKey | None) -> None:
    """Refuse a file that cannot be read whole under `key` (SQLite's quick_check), before
    anything is changed: a damaged file is restored, not copied."""
    try:
        conn = open_with(path, key)
    except sqlite.DatabaseError as exc:
        raise _unreadable(path, key, str(exc)) from None
    try:
        found = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite.DatabaseError as exc:
        found = [str(exc)]
    finally:
        conn.close()
    if found != ["ok"]:
        raise _unreadable(path, key, "; ".join(found[:3]))


def _unreadable(path: Path, key: VaultKey | None, why: str) -> VaultCorrupt:
    under = " with the vault's key, which is the right one" if key is not None else ""
    return VaultCorrupt(
        f"{path} cannot be read whole{under} ({why}): the file is damaged, and is not "
        "copied under a new key. Nothing was changed; restore it from a backup first"
    )


def opens_with(path: Path, key: VaultKey | None) -> bool:
    """Whether `key` reads `path` (the check a rekey makes to see which key a file has)."""
    try:
        open_with(path, key).close()
    except sqlite.DatabaseError:
        return False
    return True


def reencrypt(
    file: VaultFile,
    old_key: VaultKey | None,
    new_key: VaultKey,
    operation: Operation,
) -> Contents:
    """Put `file` under `new_key` (from `old_key`, None for a plain file): see the module
    docstring for the order of the steps. Returns what the file holds."""
    path = file.path
    staged = staging_path(path, operation)
    remove_staging(path, operation)
    # no WAL frames of the old file may be lost when its -wal is removed: all of them
    # are in the file before the copy is made
    src = _open_source(path, old_key)
    try:
        busy, _, _ = src.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise VaultLocked(
                f"{path} is in use by another process (its write-ahead log could not be "
                "checkpointed); the file was not changed. Stop what has it open and run "
                "the command again"
            )
        fault(operation, "checkpointed", file.kind)
        # the key as a bound value (the pragma's text without its quotes): raw, no KDF
        src.execute("ATTACH DATABASE ? AS staged KEY ?", (str(staged), new_key.pragma()[1:-1]))
        try:
            src.execute("BEGIN")
            try:
                before = contents(src)
                src.execute("SELECT sqlcipher_export('staged')")
                src.execute(f"PRAGMA staged.user_version = {before.user_version}")
                src.execute(f"PRAGMA staged.application_id = {before.application_id}")
                src.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite.Error):
                    src.execute("ROLLBACK")
                raise
            src.execute("PRAGMA staged.journal_mode = WAL")
        finally:
            src.execute("DETACH DATABASE staged")
    except sqlite.Error as exc:
        raise VaultError(
            f"{path}: could not be copied under the new key ({exc}); the file was not "
            f"changed (the partial copy {staged.name} is removed by the next run)"
        ) from None
    finally:
        src.close()
    fault(operation, "exported", file.kind)
    _fsync(staged)
    fault(operation, "synced", file.kind)
    verify(staged, new_key, before, original=path)
    fault(operation, "verified", file.kind)
    for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        if side.name.endswith("-wal") and side.exists() and side.stat().st_size:
            raise VaultLocked(
                f"{side} holds writes made while {path.name} was being copied (a process "
                "wrote to it); nothing was lost or replaced: run the command again"
            )
        with contextlib.suppress(FileNotFoundError):
            side.unlink()
    fault(operation, "wal_removed", file.kind)
    os.replace(staged, path)
    fault(operation, "renamed", file.kind)
    fsync_dir(path.parent)
    return before


def verify(staged: Path, key: VaultKey, want: Contents, *, original: Path) -> None:
    """`staged` opens with `key`, is undamaged, and holds what `want` says; else the
    error names what differs (and the original is left as it is)."""

    def refuse(why: str) -> VaultCorrupt:
        return VaultCorrupt(
            f"the new copy of {original.name} ({staged.name}) is not a faithful copy: "
            f"{why}. {original} was not replaced and is unchanged; run the command again "
            "(the copy is made anew)"
        )

    try:
        conn = open_with(staged, key)
    except sqlite.DatabaseError as exc:
        raise refuse(f"it does not open with the new key ({exc})") from None
    try:
        checks = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        if checks != ["ok"]:
            raise refuse(f"quick_check says {'; '.join(checks[:3])}")
        pages = [str(r[0]) for r in conn.execute("PRAGMA cipher_integrity_check").fetchall()]
        if pages:
            raise refuse(f"cipher_integrity_check says {'; '.join(pages[:3])}")
        got = contents(conn)
    except sqlite.DatabaseError as exc:
        raise refuse(f"it cannot be read ({exc})") from None
    finally:
        conn.close()
    if got.schema != want.schema:
        missing = sorted(str(s[1]) for s in want.schema - got.schema)
        extra = sorted(str(s[1]) for s in got.schema - want.schema)
        raise refuse(f"its schema differs (missing {missing}, unexpected {extra})")
    for table, count in want.rows.items():
        if got.rows.get(table) != count:
            raise refuse(f"table {table} has {got.rows.get(table)} rows instead of {count}")
    if got.sequence != want.sequence:
        raise refuse("its sqlite_sequence (the AUTOINCREMENT high-water marks) differs")
    if (got.user_version, got.application_id) != (want.user_version, want.application_id):
        raise refuse("its header's user_version or application_id differs")


def _open_source(path: Path, key: VaultKey | None) -> sqlite.Connection:
    try:
        return open_with(path, key)
    except sqlite.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise VaultLocked(f"{path}: database is locked by another process ({exc})") from None
        raise VaultCorrupt(
            f"{path}: cannot be read ({exc}); it was left untouched. Restore it from a "
            "backup, then run the command again"
        ) from None


def fault(operation: Operation, point: str, kind: str | None = None) -> None:
    wanted = os.environ.get(FAULT_ENV)
    if not wanted or not wanted.startswith(f"{operation}:"):
        return
    if wanted in (f"{operation}:{point}", f"{operation}:{point}:{kind}"):
        with contextlib.suppress(OSError):
            os.write(2, f"pfar: fault hook: SIGKILL after {wanted}\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
