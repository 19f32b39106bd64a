"""PostgreSQL's statements where they differ from SQLite's, and its errors read as pfar's."""

from __future__ import annotations

import psycopg

from ..dialect import Dialect, Failure


class PostgresDialect(Dialect):
    name = "postgresql"
    # The journal's write lock, for the transaction (an advisory lock, "pfar" in ASCII
    # and 1): a transaction numbers bus events and outbox messages only while it holds
    # it and commits before the next one can take it, so numbers are in commit order and
    # a reader of `seq > N` never misses one that commits later below it. One kernel's
    # group commit takes it once a batch; kernels sharing the journal take turns.
    begin = ("BEGIN", "SELECT pg_advisory_xact_lock(1885761906, 1)")
    unfinished_tasks = "task_journal"
    started_steps = "task_steps"
    pause_requested = "coalesce((state_detail->>'pause_requested')::boolean, false)"
    no_pause_requested = "(state_detail->>'pause_requested') IS NULL"
    trigger_directory = "(trigger_event->'payload'->>'directory')"
    # lower() folds by the database's LC_CTYPE (every letter under C.UTF-8 or a UTF-8
    # locale; ASCII alone under plain C)
    input_text_like = "lower(trigger_event->>'text') LIKE lower(?::text) ESCAPE '\\'"
    # a sequence: two kernels committing at once never take the same number
    next_outbox_seq = "nextval('owner_outbox_seq')"
    bus_high_water = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM bus_events_seq_seq"
    ack_offset = (
        "INSERT INTO bus_offsets(subscriber, seq, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(subscriber) DO UPDATE SET seq = greatest(bus_offsets.seq, excluded.seq), "
        "updated_at = excluded.updated_at"
    )

    def without_fields(self, column: str, fields: tuple[str, ...]) -> str:
        return f"({column} - ARRAY[{', '.join(repr(f) for f in fields)}]::text[])"

    def with_object(self, column: str, field: str, keys: tuple[str, ...]) -> str:
        pairs = ", ".join(f"'{key}', ?::text" for key in keys)
        return f"jsonb_set({column}, '{{{field}}}', jsonb_build_object({pairs}))"

    def failure(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, psycopg.Error):
            return None
        if isinstance(exc, psycopg.errors.PipelineAborted):
            # a statement sent after one that failed, skipped by the server: the
            # failed one's error was raised first and says what it was
            return Failure.REFUSED
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return Failure.BUSY
        if isinstance(exc, (psycopg.IntegrityError, psycopg.DataError)):
            return Failure.REFUSED
        if isinstance(exc, (psycopg.errors.InFailedSqlTransaction, psycopg.ProgrammingError)):
            return Failure.REFUSED  # this write only, as a statement SQLite cannot run is
        # a lost connection, a server shutting down, a disk full on the server, an
        # internal error: the writer stops, and the kernel with it (fail-stop)
        return Failure.STOP


POSTGRES = PostgresDialect()
