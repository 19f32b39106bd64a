"""The store contract run against the SQLite journal (WAL, synchronous=FULL)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import ClassVar

from pfar.journal import Journal
from pfar.journal import store as store_protocol
from pfar.vault.driver import sqlite

from .store_contract import StoreContract


def open_store(path: Path) -> Journal:
    """The SQLite store under `path`: created when missing, opened as it is otherwise."""
    return Journal.open(path / "sessions.db", create=True)


class TestSQLiteStore(StoreContract):
    opener: ClassVar[str] = f"{__name__}:open_store"

    def make_store(self, path: Path) -> Journal:
        return open_store(path)

    def integrity_problems(self, path: Path) -> list[str]:
        conn = sqlite.connect(path / "sessions.db")
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


FAMILIES = {
    "tasks": store_protocol.TaskStore,
    "questions": store_protocol.QuestionStore,
    "events": store_protocol.EventStore,
    "adapters": store_protocol.AdapterStore,
    "sessions": store_protocol.SessionStore,
}


def test_the_sqlite_journal_has_every_verb_of_every_family_and_awaits_what_the_protocol_does(
    tmp_path: Path,
) -> None:
    # The contract's tests call the verbs they test; this names a verb the protocol
    # gained and the journal lacks, or one that blocks where the protocol awaits.
    journal = open_store(tmp_path)
    try:
        for family, protocol in FAMILIES.items():
            impl = getattr(journal, family)
            verbs = [
                name
                for name, member in vars(protocol).items()
                if callable(member) and not name.startswith("_")
            ]
            assert verbs, family
            for name in verbs:
                assert hasattr(impl, name), f"{family}.{name} is missing"
                wanted = inspect.iscoroutinefunction(getattr(protocol, name))
                got = inspect.iscoroutinefunction(getattr(impl, name))
                assert got == wanted, f"{family}.{name}: async {got}, the protocol says {wanted}"
    finally:
        journal.close()
