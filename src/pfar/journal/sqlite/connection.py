"""SQLite's `Tx`: the vault connection itself, which knows its file and its dialect."""

from __future__ import annotations

from typing import ClassVar

from ...vault.sqlite import VaultConnection
from .dialect import SQLITE, SQLiteDialect


class JournalConnection(VaultConnection):
    """A vault connection that the journal's SQL runs on directly (a `tx.Tx`): nothing
    sits between a statement and the file on SQLite's hot path."""

    dialect: ClassVar[SQLiteDialect] = SQLITE
