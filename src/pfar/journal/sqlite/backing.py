"""SQLite's backing: the vault file, a reading connection and the group-commit writer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ...vault.sqlite import DamagedDatabase, check_table, recovery_advice
from ..group_commit import Op
from ..tx import Tx
from .connection import JournalConnection
from .dialect import SQLITE, SQLiteDialect
from .writer import GroupCommitWriter

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class SQLiteBacking:
    path: Path
    reader: JournalConnection
    writer_or_none: GroupCommitWriter | None

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def dialect(self) -> SQLiteDialect:
        return SQLITE

    @property
    def writer(self) -> GroupCommitWriter:
        if self.writer_or_none is None:
            raise RuntimeError("this journal was opened read-only")
        return self.writer_or_none

    async def read(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        # a read of the local file: a page from the cache or the disk, shorter than a
        # hand-off to a thread and back
        return fn(self.reader, *args, **kw)

    async def write(self, op: Op[T], point: str | tuple[str, ...] | None) -> T:
        return await self.writer.submit(op, point)

    async def check_table(self, table: str) -> None:
        check_table(self.reader, self.path, table)

    def damaged(self, detail: str) -> Exception:
        # a row hidden by a damaged key can leave the b-tree in order, so even SQLite's
        # integrity check may pass; the task's progress still says the row must exist
        return DamagedDatabase(
            f"{self.path} is damaged ({detail}); pfar changed nothing in it. "
            f"{recovery_advice(self.path)}"
        )
