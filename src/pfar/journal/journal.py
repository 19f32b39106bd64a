"""The journal: pfar's durable state on SQLite, the `store.Store` every kernel writes.

Its verbs are found in six families (`tasks`, `questions`, `events`, `adapters`,
`sessions`, `loops`), each in its own module with its SQL beside it. Every write returns
only after its transaction is committed (group commit: many callers share one
commit); each transition is checked against the row as it is inside the
transaction, so the state machine cannot be raced past.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..vault.driver import sqlite
from ..vault.keys import VaultKey
from ..vault.sqlite import Synchronous, connect, open_vault_db
from .adapter_store import SQLiteAdapterStore
from .backing import Backing
from .event_store import SQLiteEventStore
from .faults import FaultHook
from .lock_store import SQLiteLockStore
from .loop_store import SQLiteLoopStore
from .question_store import SQLiteQuestionStore, prompt_status_text
from .records import StepStatus
from .sessions import SessionManager
from .task_store import SQLiteTaskStore
from .writer import GroupCommitWriter

T = TypeVar("T")


class Journal:
    """The SQLite store. Open it with `Journal.open` (a kernel's, writable) or
    `Journal.open_readonly` (for looking at a home no kernel owns)."""

    def __init__(
        self,
        path: Path,
        writer_conn: sqlite.Connection | None,
        reader: sqlite.Connection,
        writer: GroupCommitWriter | None,
        synchronous: Synchronous = "FULL",
        key: VaultKey | None = None,
    ) -> None:
        self.path = path
        self._synchronous: Synchronous = synchronous
        self._key = key
        self._writer_conn = writer_conn
        self._db = Backing(path, reader, writer)
        self.tasks = SQLiteTaskStore(self._db)
        self.questions = SQLiteQuestionStore(self._db)
        self.events = SQLiteEventStore(self._db)
        self.adapters = SQLiteAdapterStore(self._db)
        self.loops = SQLiteLoopStore(self._db)
        self.locks = SQLiteLockStore(self._db)
        self._sessions: SessionManager | None = None

    # -- opening and closing -------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        key: VaultKey | None = None,
        create: bool = False,
        synchronous: Synchronous = "FULL",
        fault_hook: FaultHook | None = None,
    ) -> Journal:
        wconn = open_vault_db(path, "sessions", key=key, create=create, synchronous=synchronous)
        reader = connect(path, key=key, synchronous=synchronous)
        writer = GroupCommitWriter(wconn, fault_hook=fault_hook)
        return cls(path, wconn, reader, writer, synchronous, key)

    @classmethod
    def open_readonly(cls, path: Path, *, key: VaultKey | None = None) -> Journal:
        """For inspecting a vault no kernel owns: nothing can be written through it."""
        conn = open_vault_db(path, "sessions", key=key, readonly=True)
        return cls(path, None, conn, None, key=key)

    @property
    def sessions(self) -> SessionManager:
        """The session family: on a connection of its own (it is read from threads too),
        writing through this journal's writer when it has one."""
        if self._sessions is None:
            if self._db.writer_or_none is None:
                conn = open_vault_db(self.path, "sessions", key=self._key, readonly=True)
            else:
                conn = connect(self.path, key=self._key, synchronous=self._synchronous)
            self._sessions = SessionManager(conn, writer=self._db.writer_or_none)
        return self._sessions

    def close(self, *, checkpoint: bool = True) -> None:
        if self._sessions is not None:
            self._sessions.close()
        writer = self._db.writer_or_none
        if writer is not None:
            writer.close()
        if self._writer_conn is not None:
            if checkpoint and writer is not None and writer.failure is None:
                self._writer_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer_conn.close()
        self._db.reader.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(checkpoint=False)

    @property
    def writer(self) -> GroupCommitWriter:
        return self._db.writer

    def write_sync(self, op: Callable[[sqlite.Connection], T], point: str | None = None) -> T:
        return self._db.writer.run(op, point)


__all__ = ["Journal", "StepStatus", "prompt_status_text"]
