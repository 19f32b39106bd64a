"""PostgreSQL's `Tx`: an async psycopg connection, each statement awaited through the bridge."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

from psycopg import AsyncConnection

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


class PostgresTx:
    """The journal's SQL on one server connection (under the bridge's `run_sync`)."""

    dialect: ClassVar[PostgresDialect] = POSTGRES

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Rows:
        return await_io(self._execute(translate(sql), parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Rows:
        return await_io(self._executemany(translate(sql), list(parameters)))

    async def _execute(self, sql: str, parameters: Sequence[Any]) -> Rows:
        cur = self._conn.cursor()
        await cur.execute(sql, parameters or None)
        rows = await cur.fetchall() if cur.description is not None else []
        return Rows(rows, cur.rowcount)

    async def _executemany(self, sql: str, parameters: list[Sequence[Any]]) -> Rows:
        cur = self._conn.cursor()
        await cur.executemany(sql, parameters)
        return Rows([], cur.rowcount)
