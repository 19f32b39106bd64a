"""The group-commit writer runs a batch without a savepoint per write, and runs it again
with one per write when an operation in it is refused: what is committed is the same."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pfar.errors import VaultIOError
from pfar.journal.sqlite.connection import JournalConnection
from pfar.journal.sqlite.writer import GroupCommitWriter
from pfar.vault.driver import sqlite
from pfar.vault.sqlite import connect, unwritable


class Refused(Exception):
    pass


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite.Connection]:
    path = tmp_path / "w.sqlite"
    sqlite.connect(path).close()
    c = connect(path, factory=JournalConnection)
    c.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    yield c
    c.close()


def _rows(conn: sqlite.Connection) -> list[str]:
    return [k for (k,) in conn.execute("SELECT k FROM t ORDER BY k")]


def test_a_refused_operation_leaves_no_row_and_its_neighbours_theirs(
    conn: sqlite.Connection,
) -> None:
    writer = GroupCommitWriter(conn)
    runs: dict[str, int] = {}

    def insert(key: str, refuse: bool = False) -> Callable[[sqlite.Connection], str]:
        def op(c: sqlite.Connection) -> str:
            runs[key] = runs.get(key, 0) + 1
            c.execute("INSERT INTO t (k) VALUES (?)", (key,))
            if refuse:  # refused after it wrote: its row must not be committed
                raise Refused(key)
            return key

        return op

    async def go() -> list[str | BaseException]:
        futures = [writer.submit(insert("a")), writer.submit(insert("b", refuse=True))]
        futures.append(writer.submit(insert("c")))
        return list(await asyncio.gather(*futures, return_exceptions=True))

    results = asyncio.run(go())
    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], Refused)
    assert _rows(conn) == ["a", "c"]
    assert writer.commits == 1
    # the batch ran as a whole until b was refused, then again with a savepoint per write
    assert runs == {"a": 2, "b": 2, "c": 1}


def test_a_batch_nobody_refuses_runs_each_operation_once(conn: sqlite.Connection) -> None:
    writer = GroupCommitWriter(conn)
    runs: list[str] = []

    def insert(key: str) -> Callable[[sqlite.Connection], None]:
        def op(c: sqlite.Connection) -> None:
            runs.append(key)
            c.execute("INSERT INTO t (k) VALUES (?)", (key,))

        return op

    async def go() -> None:
        keys = [f"k{i:02d}" for i in range(20)]
        await asyncio.gather(*(writer.submit(insert(k)) for k in keys))

    asyncio.run(go())
    assert _rows(conn) == sorted(runs) == [f"k{i:02d}" for i in range(20)]
    assert writer.commits == 1


def test_an_operation_alone_that_is_refused_commits_nothing(conn: sqlite.Connection) -> None:
    writer = GroupCommitWriter(conn)

    def op(c: sqlite.Connection) -> None:
        c.execute("INSERT INTO t (k) VALUES ('x')")
        raise Refused("x")

    with pytest.raises(Refused):
        writer.run(op)
    assert _rows(conn) == []
    assert writer.failure is None
    assert not conn.in_transaction  # its transaction was undone whole, and ended
    assert writer.commits == 0

    def after(c: sqlite.Connection) -> None:
        c.execute("INSERT INTO t (k) VALUES ('y')")

    writer.run(after)  # the writer goes on
    assert _rows(conn) == ["y"]
    assert writer.commits == 1


def _insert(key: str) -> Callable[[sqlite.Connection], str]:
    def op(c: sqlite.Connection) -> str:
        c.execute("INSERT INTO t (k) VALUES (?)", (key,))
        return key

    return op


def test_a_write_alone_commits_at_once_and_its_caller_does_not_yield(
    conn: sqlite.Connection,
) -> None:
    writer = GroupCommitWriter(conn)
    writer.alone = lambda: True

    async def go() -> None:
        fut = writer.submit(_insert("a"))
        assert fut.done() and fut.result() == "a"  # committed inside submit
        assert _rows(conn) == ["a"] and not conn.in_transaction
        refused = writer.submit(_refuse_after_insert("b"))
        assert refused.done() and isinstance(refused.exception(), Refused)
        assert _rows(conn) == ["a"] and not conn.in_transaction

    asyncio.run(go())
    assert writer.commits == 1 and writer.failure is None


def _refuse_after_insert(key: str) -> Callable[[sqlite.Connection], None]:
    def op(c: sqlite.Connection) -> None:
        c.execute("INSERT INTO t (k) VALUES (?)", (key,))
        raise Refused(key)

    return op


def test_at_once_commits_give_the_loop_a_turn_after_a_run_of_them(
    conn: sqlite.Connection,
) -> None:
    """A caller whose writes all commit at once would never yield: after a run of them,
    its next write waits for the loop's next turn like any other."""
    writer = GroupCommitWriter(conn)
    writer.alone = lambda: True
    turns: list[int] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: turns.append(len(_rows(conn))))  # what the loop saw
        done_at_once = 0
        for i in range(40):
            fut = writer.submit(_insert(f"k{i:02d}"))
            done_at_once += fut.done()
            await fut
        assert 0 < done_at_once < 40

    asyncio.run(go())
    assert _rows(conn) == [f"k{i:02d}" for i in range(40)]
    # the loop had its turn before the caller's 40 writes were through
    assert turns and turns[0] < 40


def test_writes_that_have_company_are_grouped_as_before(conn: sqlite.Connection) -> None:
    writer = GroupCommitWriter(conn)
    writer.alone = lambda: False

    async def go() -> None:
        futs = [writer.submit(_insert(f"k{i}")) for i in range(5)]
        assert not any(f.done() for f in futs)
        await asyncio.gather(*futs)

    asyncio.run(go())
    assert writer.commits == 1
    assert _rows(conn) == [f"k{i}" for i in range(5)]


def test_a_deferred_write_rides_on_a_write_committed_at_once(
    conn: sqlite.Connection,
) -> None:
    writer = GroupCommitWriter(conn)
    writer.alone = lambda: True

    async def go() -> None:
        writer.defer(_insert("later"), within=60.0)
        assert _rows(conn) == []  # nobody waits on it: it waits for a commit
        fut = writer.submit(_insert("now"))
        assert fut.done()
        assert _rows(conn) == ["later", "now"]

    asyncio.run(go())
    assert writer.commits == 1


def test_a_commit_at_once_that_fails_stops_the_writer_and_tells_the_caller(
    conn: sqlite.Connection,
) -> None:
    """A disk I/O error is fail-stop: the caller's future says so, even with a deferred
    write first in the batch (nobody waits on that one)."""
    writer = GroupCommitWriter(conn)
    writer.alone = lambda: True
    stopped: list[BaseException] = []
    writer.on_failure = stopped.append

    def broken_disk(c: sqlite.Connection) -> None:
        raise sqlite.OperationalError("disk I/O error")

    async def go() -> None:
        writer.defer(_insert("later"), within=60.0)
        fut = writer.submit(broken_disk)
        assert fut.done()
        with pytest.raises(VaultIOError, match="the kernel must stop"):
            await fut

    asyncio.run(go())
    assert writer.failure is not None and stopped
    assert _rows(conn) == [] and not conn.in_transaction


def test_a_full_disk_met_by_one_write_stops_the_writer_and_commits_none_of_the_batch(
    conn: sqlite.Connection,
) -> None:
    writer = GroupCommitWriter(conn)

    def insert(key: str) -> Callable[[sqlite.Connection], str]:
        def op(c: sqlite.Connection) -> str:
            c.execute("INSERT INTO t (k) VALUES (?)", (key,))
            return key

        return op

    def disk_full(c: sqlite.Connection) -> str:
        # what the vault connection raises for SQLITE_FULL (vault/sqlite.py translate)
        raise unwritable(Path("w.sqlite"), sqlite.SQLITE_FULL, "database or disk is full")

    async def go() -> list[str | BaseException]:
        futures = [writer.submit(insert("a")), writer.submit(disk_full)]
        return list(await asyncio.gather(*futures, return_exceptions=True))

    results = asyncio.run(go())
    assert all(isinstance(r, VaultIOError) for r in results), results
    assert writer.failure is not None  # fail-stop: no later write is taken
    assert _rows(conn) == []
