"""SQLite's statements where they differ from PostgreSQL's, and its errors read as pfar's."""

from __future__ import annotations

from ...errors import VaultUnwritable
from ...vault.driver import sqlite
from ..dialect import Dialect, Failure


class SQLiteDialect(Dialect):
    name = "sqlite"
    # the write lock from the first statement: a batch never meets SQLITE_BUSY half-way
    begin = ("BEGIN IMMEDIATE",)
    unfinished_tasks = "task_journal INDEXED BY idx_task_journal_unfinished"
    started_steps = "task_steps INDEXED BY idx_task_steps_started"
    # SQLite picks the one key out of the text: no JSON is decoded in Python
    pause_requested = "json_extract(state_detail, '$.pause_requested')"
    no_pause_requested = "json_extract(state_detail, '$.pause_requested') IS NULL"
    trigger_directory = "json_extract(trigger_event, '$.payload.directory')"
    # SQLite's own lower() and LIKE fold ASCII letters only: pfar_lower is Python's
    # str.lower, registered on every vault connection (vault/sqlite.py)
    input_text_like = (
        "pfar_lower(json_extract(trigger_event, '$.text')) LIKE pfar_lower(?) ESCAPE '\\'"
    )
    # one writer: the unique index on seq makes max() a lookup of its last entry
    next_outbox_seq = "(SELECT coalesce(max(seq), 0) + 1 FROM owner_outbox)"
    # kept by SQLite for the AUTOINCREMENT key, never lowered when old events are pruned
    bus_high_water = "SELECT seq FROM sqlite_sequence WHERE name = 'bus_events'"
    ack_offset = (
        "INSERT INTO bus_offsets(subscriber, seq, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(subscriber) DO UPDATE SET seq = max(seq, excluded.seq), "
        "updated_at = excluded.updated_at"
    )

    def without_fields(self, column: str, fields: tuple[str, ...]) -> str:
        paths = ", ".join(f"'$.{name}'" for name in fields)
        return f"json_remove({column}, {paths})"

    def with_object(self, column: str, field: str, keys: tuple[str, ...]) -> str:
        pairs = ", ".join(f"'{key}', ?" for key in keys)
        return f"json_set({column}, '$.{field}', json_object({pairs}))"

    def failure(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, VaultUnwritable):
            return Failure.STOP
        if not isinstance(exc, sqlite.Error):
            return None
        if isinstance(exc, sqlite.OperationalError):
            text = str(exc).lower()
            if "disk i/o" in text or "database or disk is full" in text or "readonly" in text:
                return Failure.STOP
            if (exc.sqlite_errorcode or 0) & 0xFF == sqlite.SQLITE_BUSY:
                return Failure.BUSY
        return Failure.REFUSED


SQLITE = SQLiteDialect()
