"""What the SQLite store's families share: the database's path, its reading connection
and its group-commit writer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..vault.driver import sqlite
from .writer import GroupCommitWriter

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backing:
    path: Path
    reader: sqlite.Connection
    writer_or_none: GroupCommitWriter | None

    @property
    def writer(self) -> GroupCommitWriter:
        if self.writer_or_none is None:
            raise RuntimeError("this journal was opened read-only")
        return self.writer_or_none

    async def write(
        self, op: Callable[[sqlite.Connection], T], point: str | tuple[str, ...] | None
    ) -> T:
        """Run `op` in the writer's next commit; return once it is committed."""
        return await self.writer.submit(op, point)
