"""The journal backends the contract runs on, and what each supplies beyond the protocol.

A backend says how to open its store under a directory, where a child process finds
that opener (the SIGKILL test), and, if it can, how to check its database whole, how
many commits it made, and that `tasks.unfinished()` reads an index. The contract's
tests see a backend only through these hooks and the store's own verbs. Adding one is
a class here and a name in `BACKENDS` (the `backend` fixture's params follow it).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import ClassVar

from pfar.journal import Journal, TaskState
from pfar.journal.postgres.store import open_journal as open_postgres
from pfar.journal.sqlite import open_journal
from pfar.journal.store import Store
from pfar.journal.task_pages import TaskCursor, TaskFilter
from pfar.vault.driver import sqlite

from ..pg_support import require_postgres, store_dsn
from .helpers import run
from .verbs import unwrapped


class Backend:
    """The defaults: a backend without a whole-database check, a commit counter or a
    query plan to look at skips those checks."""

    name: ClassVar[str]
    # "module:function" a child process calls as function(path) to open the store
    opener: ClassVar[str]

    def open(self, path: Path) -> Store:
        """An opened store kept under `path` (a directory), created if it is not there
        and opened as it is if it is: reopening shows what was committed."""
        raise NotImplementedError

    def close(self, store: Store) -> None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        run(journal.aclose())

    def available(self) -> None:
        """Skip (or, under CI=true, fail) a test this machine cannot run on the backend."""

    def integrity_problems(self, path: Path) -> list[str]:
        """What a whole-database check of the store under `path` finds ([] when sound)."""
        return []

    def commits_made(self, store: Store) -> int | None:
        """How many commits the store made so far (None: the backend does not count)."""
        return None

    def check_unfinished_reads_an_index(self, store: Store) -> None:
        """Assert that `await store.tasks.unfinished()` reads only unfinished rows."""

    def check_activity_reads_time_indexes(self, store: Store) -> None:
        """Assert that `await store.tasks.activity(...)` reads each table by its time."""

    def check_task_pages_read_an_index(self, store: Store) -> None:
        """Assert that a page of the task list (all, by state, by template, after a
        cursor) is read in an index's order, never sorted from the whole table."""


def open_sqlite_store(path: Path) -> Journal:
    """The SQLite store under `path`: created when missing, opened as it is otherwise."""
    return open_journal(path / "sessions.db", create=True)


class SQLiteBackend(Backend):
    """The SQLite journal (WAL, synchronous=FULL)."""

    name = "sqlite"
    opener = f"{__name__}:open_sqlite_store"

    def open(self, path: Path) -> Store:
        return open_sqlite_store(path)

    def integrity_problems(self, path: Path) -> list[str]:
        conn = sqlite.connect(path / "sessions.db")
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        finally:
            conn.close()
        return [] if rows == ["ok"] else rows

    def commits_made(self, store: Store) -> int | None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        return journal.writer.commits

    def check_unfinished_reads_an_index(self, store: Store) -> None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        seen: list[str] = []
        conn = journal._db.scanner or journal._db.reader  # unfinished() is a scan
        conn.set_trace_callback(seen.append)
        try:
            run(journal.tasks.unfinished())
        finally:
            conn.set_trace_callback(None)
        (sql,) = [s for s in seen if "task_journal" in s]
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        # a walk of the partial index alone (it holds unfinished rows), in updated_at order
        assert "idx_task_journal_unfinished" in plan, plan
        assert "TEMP B-TREE" not in plan, plan

    def check_activity_reads_time_indexes(self, store: Store) -> None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        seen: list[str] = []
        conn = journal._db.scanner or journal._db.reader  # activity() is a scan
        conn.set_trace_callback(seen.append)
        try:
            run(journal.tasks.activity(date(2001, 3, 1), date(2001, 3, 8)))
        finally:
            conn.set_trace_callback(None)
        indexes = ("idx_task_journal_created", "idx_task_steps_started_at", "idx_llm_calls_at")
        read = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
        assert len(read) == 4, seen
        for sql, index in zip(read, (*indexes, indexes[2]), strict=True):
            plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            # a range of the time index: the rows of the window, never the whole table
            assert f"USING INDEX {index} (" in plan or f"USING COVERING INDEX {index} (" in plan, (
                plan
            )
            assert "SCAN" not in plan.replace(f"SCAN {index}", ""), plan

    def check_task_pages_read_an_index(self, store: Store) -> None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        conn = journal._db.scanner or journal._db.reader  # page() is a scan
        after = TaskCursor("2030-05-01T12:00:00.000000Z", "t")
        for wanted, cursor, index in (
            (TaskFilter(), None, "idx_task_journal_created"),
            (TaskFilter(states=(TaskState.Completed,)), after, "idx_task_journal_state_created"),
            (TaskFilter(template_id="note"), None, "idx_task_journal_template_created"),
        ):
            seen: list[str] = []
            conn.set_trace_callback(seen.append)
            try:
                run(journal.tasks.page(wanted, cursor, 50))
            finally:
                conn.set_trace_callback(None)
            (sql,) = [s for s in seen if "task_journal" in s]
            plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert index in plan and "TEMP B-TREE" not in plan, (wanted, plan)


async def open_postgres_store(path: Path) -> Journal:
    """The PostgreSQL store of `path`: a schema of the run's database that the directory
    names, created when missing, opened as it is otherwise."""
    return await open_postgres(store_dsn(path), create=True)


class PostgresBackend(Backend):
    """The PostgreSQL journal, on a schema of this run's own database."""

    name = "postgresql"
    opener = f"{__name__}:open_postgres_store"

    def available(self) -> None:
        require_postgres()

    def open(self, path: Path) -> Store:
        return run(open_postgres_store(path))

    def commits_made(self, store: Store) -> int | None:
        journal = unwrapped(store)
        assert isinstance(journal, Journal)
        return journal.writer.commits


BACKENDS: dict[str, Backend] = {b.name: b for b in (SQLiteBackend(), PostgresBackend())}

__all__ = ["BACKENDS", "Backend", "open_postgres_store", "open_sqlite_store"]
