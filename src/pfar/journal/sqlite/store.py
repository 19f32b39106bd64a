"""Opening the journal on a SQLite file of the vault."""

from __future__ import annotations

from pathlib import Path

from ...vault.keys import VaultKey
from ...vault.sqlite import Synchronous, connect, open_vault_db
from ..faults import FaultHook
from ..journal import Journal
from ..sessions import SessionManager
from .backing import SQLiteBacking
from .connection import JournalConnection
from .sessions import open_sessions
from .writer import GroupCommitWriter


def open_journal(
    path: Path,
    *,
    key: VaultKey | None = None,
    create: bool = False,
    synchronous: Synchronous = "FULL",
    fault_hook: FaultHook | None = None,
) -> Journal:
    """A kernel's journal: a writing connection for the group commit, another to read."""
    wconn = _journal_conn(
        open_vault_db(
            path,
            "sessions",
            key=key,
            create=create,
            synchronous=synchronous,
            factory=JournalConnection,
        )
    )
    opened = [wconn]
    try:
        reader = _journal_conn(
            connect(path, key=key, synchronous=synchronous, factory=JournalConnection)
        )
        opened.append(reader)
        scanner = _journal_conn(
            connect(path, key=key, synchronous=synchronous, factory=JournalConnection)
        )
    except BaseException:
        for conn in opened:
            conn.close()
        raise
    writer = GroupCommitWriter(wconn, fault_hook=fault_hook)
    db = SQLiteBacking(path, reader, writer, scanner)

    def sessions() -> SessionManager:
        # a connection of its own: a session is read between the journal's reads
        conn = _journal_conn(
            connect(path, key=key, synchronous=synchronous, factory=JournalConnection)
        )
        sessions_db = SQLiteBacking(path, conn, writer)

        def close() -> None:
            sessions_db.close()
            conn.close()

        return SessionManager(sessions_db, on_close=close)

    def close(checkpoint: bool) -> None:
        db.close()
        writer.close()
        if checkpoint and writer.failure is None:
            wconn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wconn.close()
        reader.close()

    return Journal(db, sessions=sessions, on_close=close, path=path)


def open_readonly(path: Path, *, key: VaultKey | None = None) -> Journal:
    """For inspecting a vault no kernel owns: nothing can be written through it."""
    conn = _journal_conn(
        open_vault_db(path, "sessions", key=key, readonly=True, factory=JournalConnection)
    )
    try:
        scanner = _journal_conn(connect(path, key=key, readonly=True, factory=JournalConnection))
    except BaseException:
        conn.close()
        raise
    db = SQLiteBacking(path, conn, None, scanner)

    def sessions() -> SessionManager:
        return open_sessions(path, key=key, readonly=True)

    def close(_checkpoint: bool) -> None:
        db.close()
        conn.close()

    return Journal(db, sessions=sessions, on_close=close, path=path)


def _journal_conn(conn: object) -> JournalConnection:
    assert isinstance(conn, JournalConnection)
    return conn
