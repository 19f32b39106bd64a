"""The SQLite adapter store: each adapter's position and settings (`store.AdapterStore`)."""

from __future__ import annotations

import sqlite3
from typing import Any

from . import events_sql
from .backing import Backing
from .records import now_rfc3339


class SQLiteAdapterStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def get(self, adapter: str) -> dict[str, Any] | None:
        return events_sql.get_adapter_state(self._db.reader, adapter)

    async def put(self, adapter: str, state: dict[str, Any]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            events_sql.put_adapter_state_txn(conn, adapter, state, now_rfc3339())

        await self._db.write(op, None)
