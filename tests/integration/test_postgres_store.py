"""The journal on a real PostgreSQL server: what only a server with concurrent
transactions can show (the bus read past numbers taken in one order and committed in
another), its schema versions, and its errors at the store's edge."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from pfar.errors import StoreUnavailable, VaultCorrupt, VaultMissing, WriteRefused
from pfar.journal import Journal
from pfar.journal.bus_sql import BusEventKind as K
from pfar.journal.postgres.schema import latest_version
from pfar.journal.postgres.store import describe, open_journal

from ..contract import builders as b
from ..pg_support import require_postgres, store_dsn


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    require_postgres()
    return store_dsn(tmp_path)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as r:
        yield r


def _open(runner: asyncio.Runner, dsn: str, **kw: object) -> Journal:
    return runner.run(open_journal(dsn, create=True, **kw))  # type: ignore[arg-type]


def test_bus_events_are_numbered_in_commit_order_across_connections(
    runner: asyncio.Runner, dsn: str
) -> None:
    """Another kernel's transaction holds the journal's write lock with an event numbered:
    this kernel's commit waits for it, so its event is numbered after, and a reader of
    `seq > N` never misses an event that commits later with a lower number."""
    journal = _open(runner, dsn)
    try:
        runner.run(journal.events.publish(K.TaskCreated, None, {}))
        first = runner.run(journal.events.bus(0))
        assert [e.kind for e in first] == [K.TaskCreated]
        other = psycopg.connect(dsn)
        other.execute("SELECT pg_advisory_xact_lock(1885761906, 1)")  # as a writer begins
        other.execute(
            "INSERT INTO bus_events(kind, task_id, body_json, at) "
            "VALUES ('TaskQueued', NULL, '{}', 't')"
        )

        async def publish_then_look() -> list[K]:
            fast = asyncio.create_task(journal.events.publish(K.TaskStarted, None, {}))
            await asyncio.sleep(0.3)
            assert not fast.done()  # waiting for the other transaction's commit
            assert await journal.events.bus(first[-1].seq) == []  # nothing committed yet
            await asyncio.to_thread(other.commit)
            await fast
            return [e.kind for e in await journal.events.bus(first[-1].seq)]

        assert runner.run(publish_then_look()) == [K.TaskQueued, K.TaskStarted]
        other.close()
        got = runner.run(journal.events.bus(0))
        assert [e.seq for e in got] == sorted(e.seq for e in got)
        assert runner.run(journal.events.bus_last()) == got[-1].seq
    finally:
        runner.run(journal.aclose())


def test_a_newer_schema_is_refused_naming_both_versions(runner: asyncio.Runner, dsn: str) -> None:
    runner.run(_open(runner, dsn).aclose())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, 'future.sql', 't')")
    with pytest.raises(VaultCorrupt) as info:
        _open(runner, dsn)
    assert "999" in str(info.value) and str(latest_version()) in str(info.value)
    with psycopg.connect(dsn, autocommit=True) as conn:  # nothing was changed
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (999,)


def test_a_database_without_a_journal_is_named_not_created(
    runner: asyncio.Runner, dsn: str
) -> None:
    with pytest.raises(VaultMissing) as info:
        runner.run(open_journal(dsn))
    assert "pfar init --postgres" in str(info.value)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('task_journal')").fetchone() == (None,)


def test_a_refused_write_is_pfars_error_and_its_neighbours_commit(
    runner: asyncio.Runner, dsn: str
) -> None:
    journal = _open(runner, dsn)
    try:
        t = b.task()
        runner.run(journal.tasks.create(t))

        async def both() -> list[object]:
            return await asyncio.gather(
                journal.tasks.create(replace(b.task(), task_id=t.task_id)),
                journal.tasks.create(b.task()),
                return_exceptions=True,
            )

        dup, fresh = runner.run(both())
        assert isinstance(dup, WriteRefused) and not isinstance(dup, psycopg.Error)
        assert not isinstance(fresh, BaseException)
        assert runner.run(journal.tasks.counts()) == {"Extracting": 2}
    finally:
        runner.run(journal.aclose())


def test_an_unreachable_server_is_named_without_its_password(runner: asyncio.Runner) -> None:
    dsn = "postgresql://pfar:hunter2@127.0.0.1:9/nowhere?connect_timeout=2"
    assert "hunter2" not in describe(dsn)
    with pytest.raises(StoreUnavailable) as info:
        runner.run(open_journal(dsn))
    assert "127.0.0.1:9/nowhere" in str(info.value) and "hunter2" not in str(info.value)


def test_a_dsn_libpq_cannot_read_is_refused_without_quoting_it() -> None:
    from pfar.config import dsn_has_password

    with pytest.raises(ValueError) as info:
        dsn_has_password("postgresql://u:hun%zzter@h/db")
    assert "hun" not in str(info.value) and "zzter" not in str(info.value)
