"""The journal: pfar's durable state, the `store.Store` every kernel writes.

Its verbs are found in six families (`tasks`, `questions`, `events`, `adapters`,
`sessions`, `loops`, and `locks`), each in its own module with its SQL beside it,
written once over a backing (`backing.py`): SQLite's (`journal/sqlite/`, the default)
or PostgreSQL's (`journal/postgres/`). Every write returns only after its transaction
is committed (group commit: many callers share one commit); each transition is
checked against the row as it is inside the transaction, so the state machine cannot
be raced past.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path

from .adapter_store import SQLiteAdapterStore
from .backing import Backing, Writer
from .event_store import SQLiteEventStore
from .lock_store import SQLiteLockStore
from .loop_store import SQLiteLoopStore
from .question_store import SQLiteQuestionStore, prompt_status_text
from .records import StepStatus
from .sessions import SessionManager
from .task_store import SQLiteTaskStore


class Journal:
    """A store over one backing. Open a SQLite one with `journal.sqlite.open_journal` (a
    kernel's, writable) or `open_readonly` (for looking at a home no kernel owns); a
    PostgreSQL one with `journal.postgres.store.open_journal`; either from the home's
    configuration with `journal.open_store.open_store`."""

    def __init__(
        self,
        db: Backing,
        *,
        sessions: Callable[[], SessionManager],
        on_close: Callable[[bool], Awaitable[None] | None],
        path: Path | None = None,
    ) -> None:
        self.path = path  # the SQLite file, None on a server
        self.where = db.where
        self._db = db
        self._open_sessions = sessions
        self._on_close = on_close
        self.tasks = SQLiteTaskStore(db)
        self.questions = SQLiteQuestionStore(db)
        self.events = SQLiteEventStore(db)
        self.adapters = SQLiteAdapterStore(db)
        self.loops = SQLiteLoopStore(db)
        self.locks = SQLiteLockStore(db)
        self._sessions: SessionManager | None = None

    # -- opening and closing -------------------------------------------------

    @property
    def sessions(self) -> SessionManager:
        """The session family, writing through this journal's writer when it has one."""
        if self._sessions is None:
            self._sessions = self._open_sessions()
        return self._sessions

    def close(self, *, checkpoint: bool = True) -> None:
        """Close a SQLite journal (a server's is closed with `aclose`, on its loop)."""
        if self._sessions is not None:
            self._sessions.close()
        closing = self._on_close(checkpoint)
        if inspect.isawaitable(closing):
            raise RuntimeError(f"the journal on {self.where} is closed with `await aclose()`")

    async def aclose(self, *, checkpoint: bool = True) -> None:
        """Commit what is queued and close, on any backend."""
        if self._sessions is not None:
            self._sessions.close()
        closing = self._on_close(checkpoint)
        if closing is not None:
            await closing

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(checkpoint=False)

    @property
    def writer(self) -> Writer:
        return self._db.writer


__all__ = ["Journal", "StepStatus", "prompt_status_text"]
