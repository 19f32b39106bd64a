"""SQLite's backing: the vault file, a reading connection and the group-commit writer.

A read of a few rows by key runs on the caller's thread, as the writer commits
(writer.py says why); a scan, whose rows grow with the journal (a listing, recovery's
look at the unfinished tasks, a conversation), runs on a thread and a connection of
its own, so that it never holds the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ...errors import PfarError, VaultIOError
from ...vault.driver import sqlite
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
    # the scans' own connection, used by the scanning thread alone: a scan holds its
    # snapshot until its last row is read, and a read by key on the same connection
    # meanwhile would not see a commit made since (None: scans run as reads do)
    scanner: JournalConnection | None = None
    scans: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="pfar-journal-scan")
    )

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
        # a few rows by key, from the page cache or the local disk: on the caller's
        # thread, as the writer commits (a hand-off to the reading thread and back cost
        # more instructions than the read: bench.instructions, 7 % more a task)
        try:
            return fn(self.reader, *args, **kw)
        except sqlite.Error as exc:
            raise self._read_failed(exc) from exc

    async def scan(self, fn: Callable[Concatenate[Tx, P], T], *args: P.args, **kw: P.kwargs) -> T:
        if self.scanner is None:
            return await self.read(fn, *args, **kw)
        call = functools.partial(fn, self.scanner, *args, **kw)
        try:
            return await asyncio.get_running_loop().run_in_executor(self.scans, call)
        except sqlite.Error as exc:
            raise self._read_failed(exc) from exc

    def _read_failed(self, exc: sqlite.Error) -> Exception:
        if isinstance(exc, PfarError):  # a damaged page, named by the vault connection
            return exc
        # the driver's own error never leaves the journal
        return VaultIOError(f"reading the journal {self.path} failed: {exc}")

    def close(self) -> None:
        """Let the scanning thread finish what it was given, and close its connection;
        the caller closes the others."""
        self.scans.shutdown(wait=True)
        if self.scanner is not None:
            self.scanner.close()

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
