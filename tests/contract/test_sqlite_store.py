"""The store contract run against the SQLite journal (WAL, synchronous=FULL)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import ClassVar

from pfar.journal import Journal

from .store_contract import StoreContract


def open_store(path: Path) -> Journal:
    """The SQLite store under `path`: created when missing, opened as it is otherwise."""
    return Journal.open(path / "sessions.db", create=True)


class TestSQLiteStore(StoreContract):
    opener: ClassVar[str] = f"{__name__}:open_store"

    def make_store(self, path: Path) -> Journal:
        return open_store(path)

    def integrity_problems(self, path: Path) -> list[str]:
        conn = sqlite3.connect(path / "sessions.db")
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        finally:
            conn.close()
        return [] if rows == ["ok"] else rows

    def commits_made(self, store: Journal) -> int | None:
        return store.writer.commits

    def check_unfinished_reads_an_index(self, store: Journal) -> None:
        seen: list[str] = []
        conn = store._db.reader
        conn.set_trace_callback(seen.append)
        try:
            asyncio.run(store.tasks.unfinished())
        finally:
            conn.set_trace_callback(None)
        (sql,) = [s for s in seen if "task_journal" in s]
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        # a walk of the partial index alone (it holds unfinished rows), in updated_at order
        assert "idx_task_journal_unfinished" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
