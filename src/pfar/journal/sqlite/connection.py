"""SQLite's `Tx`: the vault connection itself, which knows its file and its dialect."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import ClassVar

from ...vault.sqlite import VaultConnection
from ..tx import Cursor
from .dialect import SQLITE, SQLiteDialect


class JournalConnection(VaultConnection):
    """A vault connection that the journal's SQL runs on directly (a `tx.Tx`): nothing
    sits between a statement and the file on SQLite's hot path."""

    dialect: ClassVar[SQLiteDialect] = SQLITE

    def settle(self) -> None:
        """Each statement ran when it was given: nothing is waiting."""

    def matched(self, cursor: Cursor, rows: int = 1) -> bool:
        return cursor.rowcount == rows  # known already: nothing to defer

    def optimistic(self) -> AbstractContextManager[None]:
        return nullcontext()
