"""PostgreSQL's `Tx`: an async psycopg connection, each statement awaited through the bridge.

Reads await each statement's rows. The writer's connection is in pipeline mode: a
statement is sent without waiting for its result, and the results come back together
when one is read (a row, a row count) or the transaction settles (`Tx.settle`). A
group commit of 40 writes then waits on the server about 17 times (where a write reads
a row before it moves it), not a hundred, and on the event loop, which a busy kernel
keeps full, as rarely.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline

from ..tx import Cursor, GuardMissed
from .bridge import await_io
from .dialect import POSTGRES, PostgresDialect

_TRANSLATED: dict[str, str] = {}


def translate(sql: str) -> str:
    """The journal's SQL (`?` placeholders) as psycopg takes it (`%s`, `%` doubled).
    None of pfar's statements has a `?` inside a string literal; the JSON operator `?` of
    PostgreSQL's own statements is written `??` there and comes out as `?`."""
    found = _TRANSLATED.get(sql)
    if found is None:
        found = sql.replace("%", "%%").replace("??", "\0").replace("?", "%s").replace("\0", "?")
        _TRANSLATED[sql] = found
    return found


class Rows:
    """A statement's rows, fetched whole (the journal reads small result sets)."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class SentRows:
    """A pipelined statement's rows: the first look at them waits for its result."""

    __slots__ = ("_cursor", "_rows", "_tx")

    def __init__(self, cursor: AsyncCursor[Any], tx: PostgresTx) -> None:
        self._cursor = cursor
        self._tx = tx
        self._rows: Rows | None = None

    def _result(self) -> Rows:
        if self._rows is None:
            self._rows = await_io(self._tx._result(self._cursor))
        return self._rows

    @property
    def rowcount(self) -> int:
        return self._result().rowcount

    def fetchone(self) -> Any:
        return self._result().fetchone()

    def fetchall(self) -> list[Any]:
        return self._result().fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._result())


class PostgresTx:
    """The journal's SQL on one server connection (under the bridge's `run_sync`), and
    the connection's `pipeline` when it is in pipeline mode (the writer's)."""

    dialect: ClassVar[PostgresDialect] = POSTGRES

    def __init__(self, conn: AsyncConnection[Any], pipeline: AsyncPipeline | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self._optimistic = False
        self._guards: list[tuple[Cursor, int]] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Rows | SentRows:
        if self._pipeline is not None:
            return SentRows(await_io(self._send(translate(sql), parameters)), self)
        return await_io(self._execute(translate(sql), parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Rows | SentRows:
        if self._pipeline is not None:
            return SentRows(await_io(self._send_many(translate(sql), list(parameters))), self)
        return await_io(self._executemany(translate(sql), list(parameters)))

    def settle(self) -> None:
        if self._pipeline is not None:
            await_io(self._sync())
        guards, self._guards = self._guards, []
        if any(cursor.rowcount != rows for cursor, rows in guards):
            raise GuardMissed()

    def matched(self, cursor: Cursor, rows: int = 1) -> bool:
        if self._optimistic and self._pipeline is not None:
            self._guards.append((cursor, rows))  # read when the transaction settles
            return True
        return cursor.rowcount == rows

    @contextmanager
    def optimistic(self) -> Iterator[None]:
        self._optimistic = True
        try:
            yield
        finally:
            self._optimistic = False
            self._guards.clear()

    async def _execute(self, sql: str, parameters: Sequence[Any]) -> Rows:
        cur = self._conn.cursor()
        await cur.execute(sql, parameters or None)
        rows = await cur.fetchall() if cur.description is not None else []
        return Rows(rows, cur.rowcount)

    async def _executemany(self, sql: str, parameters: list[Sequence[Any]]) -> Rows:
        cur = self._conn.cursor()
        await cur.executemany(sql, parameters)
        return Rows([], cur.rowcount)

    async def _send(self, sql: str, parameters: Sequence[Any]) -> AsyncCursor[Any]:
        cur = self._conn.cursor()
        await cur.execute(sql, parameters or None)  # queued: no result awaited
        return cur

    async def _send_many(self, sql: str, parameters: list[Sequence[Any]]) -> AsyncCursor[Any]:
        cur = self._conn.cursor()
        await cur.executemany(sql, parameters)
        return cur

    async def _sync(self) -> None:
        assert self._pipeline is not None
        await self._pipeline.sync()

    async def _result(self, cur: AsyncCursor[Any]) -> Rows:
        if cur.pgresult is None:
            await self._sync()
        rows = await cur.fetchall() if cur.description is not None else []
        return Rows(rows, cur.rowcount)
