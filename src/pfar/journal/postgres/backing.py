"""PostgreSQL's backing: a pool of reading connections and the writer's own connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ...errors import StoreUnavailable, VaultCorrupt
from ..group_commit import Op
from ..tx import Tx
from .bridge import run_sync
from .connection import PostgresTx
from .dialect import POSTGRES, PostgresDialect
from .writer import PostgresWriter

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class PostgresBacking:
    where: str
    pool: AsyncConnectionPool[AsyncConnection[Any]]
    writer_or_none: PostgresWriter | None

    @property
    def dialect(self) -> PostgresDialect:
        return POSTGRES

    @property
    def writer(self) -> PostgresWriter:
        if self.writer_or_none is None:
            raise RuntimeError("this journal was opened read-only")
        return self.writer_or_none

    async def read(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        try:
            async with self.pool.connection() as conn:
                return await run_sync(fn, PostgresTx(conn), *args, **kw)
        except Exception as exc:
            if POSTGRES.failure(exc) is None:
                raise
            raise StoreUnavailable(f"reading the journal on {self.where} failed: {exc}") from exc

    async def scan(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return await self.read(fn, *args, **kw)  # every read awaits the server

    async def write(self, op: Op[T], point: str | tuple[str, ...] | None) -> T:
        return await self.writer.submit(op, point)

    async def check_table(self, table: str) -> None:
        """The server keeps its own pages (checksums, WAL): nothing to look at here."""

    def damaged(self, detail: str) -> Exception:
        return VaultCorrupt(
            f"the journal on {self.where} is inconsistent ({detail}); pfar changed nothing "
            "in it. Restore the database from its backup (the server's own, or pg_dump's)."
        )
