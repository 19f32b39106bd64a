"""Opening vault databases: pragmas for durability, migrations, and refusal of damaged files.

A database that cannot be read is reported, never recreated: `open_vault_db`
creates a file only when asked to (`pfar init`), and raises otherwise.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

from ..errors import VaultCorrupt, VaultLocked, VaultMissing
from .schema import migrate, schema_version

Synchronous = Literal["FULL", "NORMAL"]


def connect(
    path: Path, *, synchronous: Synchronous = "FULL", readonly: bool = False
) -> sqlite3.Connection:
    """A connection with pfar's pragmas. Autocommit mode: transactions are explicit."""
    uri = f"file:{path}?mode={'ro' if readonly else 'rw'}"
    try:
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10.0
        )
    except sqlite3.OperationalError as exc:
        raise VaultMissing(f"{path}: cannot open ({exc})") from None
    try:
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
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise VaultLocked(f"{path}: database is locked by another process ({exc})") from None
        raise VaultCorrupt(
            f"{path}: not a readable pfar database ({exc}); it was left untouched. "
            "Restore it from a backup or move it aside and run `pfar init`."
        ) from None
    return conn


def open_vault_db(
    path: Path,
    kind: str,
    *,
    create: bool = False,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
) -> sqlite3.Connection:
    """Open (and migrate) the vault database `kind` ("sessions", "secrets", "memory")."""
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
            "restore it from a backup, or move it aside and run `pfar init` to start anew."
        )
    if not create:
        # Look before touching: even switching to WAL would write to a foreign file.
        probe = connect(path, readonly=True)
        try:
            is_vault = schema_version(probe) > 0
        finally:
            probe.close()
        if not is_vault:
            raise VaultCorrupt(
                f"{path} is a SQLite database but not a pfar {kind} vault (no schema_version "
                "table); it was left untouched"
            )
    conn = connect(path, synchronous=synchronous, readonly=readonly)
    if not readonly:
        try:
            migrate(conn, kind, path)
        except BaseException:
            conn.close()
            raise
    return conn
