"""The session family on a SQLite file of its own (outside a kernel: tests, tools)."""

from __future__ import annotations

from pathlib import Path

from ...vault.keys import VaultKey
from ...vault.sqlite import Synchronous, open_vault_db
from ..sessions import SessionManager
from .backing import SQLiteBacking
from .connection import JournalConnection
from .writer import GroupCommitWriter


def open_sessions(
    path: Path,
    *,
    key: VaultKey | None = None,
    create: bool = False,
    synchronous: Synchronous = "FULL",
    writer: GroupCommitWriter | None = None,
    readonly: bool = False,
) -> SessionManager:
    """Open (and migrate) sessions.db at `path`; write through `writer` when given."""
    conn = open_vault_db(
        path,
        "sessions",
        key=key,
        create=create,
        synchronous=synchronous,
        readonly=readonly,
        factory=JournalConnection,
    )
    assert isinstance(conn, JournalConnection)
    return sessions_on(conn, writer=writer)


def sessions_on(
    conn: JournalConnection, *, writer: GroupCommitWriter | None = None
) -> SessionManager:
    """A manager reading on `conn` (which it closes), writing through `writer`, or
    through a writer of its own on `conn` when none is given (which refuses a write
    another connection locks out, and goes on)."""
    own = None if writer is not None else GroupCommitWriter(conn, stop_when_busy=False)
    db = SQLiteBacking(conn.path, conn, writer or own)

    def close() -> None:
        db.close()
        if own is not None:
            own.close()
        conn.close()

    return SessionManager(db, on_close=close)
