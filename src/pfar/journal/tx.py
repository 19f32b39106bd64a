"""What the journal's SQL runs on: the statements of one transaction, on any backend.

Each family's SQL (`tasks_sql.py`, `moves.py`, ...) is plain synchronous code over a
`Tx`: it reads the row it moves, checks the move and writes, and what commits together
is written there once. A backend supplies the `Tx`:
- SQLite's is the vault connection itself (`journal/sqlite/`): its statements run on
  the caller's thread, with nothing between the SQL and the file;
- PostgreSQL's wraps an async psycopg connection (`journal/postgres/`): the same
  function runs in a greenlet whose every statement awaits the server, so the event
  loop goes on meanwhile (SQLAlchemy's asyncio bridge works the same way).

Statements are written with `?` placeholders in the SQL both backends speak; the few
that differ (a JSON field, an index hint, a sequence) come from `tx.dialect`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .dialect import Dialect


class Cursor(Protocol):
    """The rows of one statement (tuples), and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Tx(Protocol):
    """A connection inside a transaction (or, for reads, a snapshot) of the journal."""

    @property
    def dialect(self) -> Dialect: ...
    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
    def settle(self) -> None:
        """Every statement sent so far has run: its error, if one failed, is raised
        here. A backend that sends statements ahead of their results (PostgreSQL's
        writer, in pipeline mode) waits for them; one that runs each as it is given
        (SQLite) has nothing to wait for. A statement's rows, or its row count, settle
        it as they are read."""

    def matched(self, cursor: Cursor, rows: int = 1) -> bool:
        """Whether the write `cursor` ran changed `rows` rows: a guard that nearly
        always holds (the task still executes, no pause asked for). Inside
        `optimistic()` a backend that sends statements ahead of their results may say
        True at once and check when the transaction settles: a guard that missed
        raises `GuardMissed` there, and the group commit runs the batch again, each
        write on its own and every guard answered exactly."""

    def optimistic(self) -> AbstractContextManager[None]:
        """While open, `matched` may be answered when the transaction settles."""


class GuardMissed(Exception):
    """A guard `Tx.matched` said held did not: the operations that relied on it are
    run again, each on its own (a group commit's business, never a caller's)."""
