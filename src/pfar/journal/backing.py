"""What every family of a store shares: where its database is, how it reads, how it writes.

A family's verbs are written once over this: `read` runs a function of the family's
SQL on a `Tx` that sees the last commit, `write` queues an operation into the next
group commit and returns once it is committed. SQLite's backing reads its vault file;
PostgreSQL's reads and writes a server through a pool, each statement awaited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .dialect import Dialect
from .group_commit import Op, StoreWriter
from .tx import Tx

T = TypeVar("T")
P = ParamSpec("P")


class Writer(StoreWriter, Protocol):
    """A backend's group-commit writer: what its kernel sees of it (`StoreWriter`), and
    how a family queues a write nobody waits for (`defer`)."""

    def defer(
        self, op: Op[Any], point: str | tuple[str, ...] | None = None, *, within: float = 0.05
    ) -> None: ...


class Backing(Protocol):
    @property
    def where(self) -> str:
        """The database, as a message names it (a file, or a server without password)."""

    @property
    def writer(self) -> Writer: ...

    @property
    def dialect(self) -> Dialect: ...

    async def read(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """`fn(tx, *args)` on a snapshot that holds every committed write: a read of a
        few rows by key (a task, its steps, a question)."""

    async def scan(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """As `read`, for a read whose rows grow with the journal (a listing, the
        unfinished tasks, a conversation): never run on the event loop's thread."""

    async def write(self, op: Op[T], point: str | tuple[str, ...] | None) -> T:
        """Run `op` in the writer's next commit; return once it is committed."""

    async def check_table(self, table: str) -> None:
        """Raise pfar's damage error when the backend finds `table` damaged (a read came
        back shorter than the rows that must exist); nothing where the server checks
        its own pages."""

    def damaged(self, detail: str) -> Exception:
        """The error for rows that must exist and cannot be read (`detail` says which)."""
