"""Where a journal in the vault stands, read from its file before a kernel opens it.

A start compares the journal's position (the bus's high-water mark) with the record of
what the last kernel acknowledged (vault/acknowledged.py), and names the tasks a
journal that went back in time lost (kernel/vault_start.py, kernel/lost_work.py);
`pfar vault accept-loss` journals such a loss. Each function opens its own connection
to the file and closes it, and gives back plain values: the checks run under the home
lock, before any kernel writes, so what one read sees the next sees as well.
While a kernel runs, `BusMarkWatcher` reads the mark inside each commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, cast

from ...errors import PfarError
from ...vault import integrity
from ...vault.driver import sqlite
from ...vault.keys import VaultKey
from ...vault.sqlite import connect
from .. import bus_sql
from ..bus_sql import BusEventKind
from ..json_text import JsonValue
from ..records import loads
from ..tx import Tx
from .connection import JournalConnection
from .dialect import SQLITE

_NEWEST = (
    "SELECT max(t) FROM (SELECT max(at) AS t FROM bus_events "
    "UNION ALL SELECT max(updated_at) FROM task_journal "
    "UNION ALL SELECT max(started_at) FROM kernel_boots "
    "UNION ALL SELECT max(ended_at) FROM kernel_boots)"
)
_CHUNK = 500  # ids asked about in one statement (SQLite's bound-parameter limit is larger)


@dataclass(frozen=True, slots=True)
class JournalMark:
    """Where a journal stands: its position (the bus's high-water mark) and when the
    newest thing it holds was written (None: it holds nothing)."""

    position: int
    newest: datetime | None


@dataclass(frozen=True, slots=True)
class MarkedEvent:
    """One bus event as the start's checks read it: its number, body and time."""

    seq: int
    body: JsonValue
    at: str


def journal_mark(path: Path, key: VaultKey | None) -> JournalMark | None:
    """Where the journal in `path` stands; None when it is not a journal with an event
    bus (not a pfar journal, or one older than the bus's migration)."""
    with integrity.reading(path, key) as conn:
        if not _has_bus(conn):
            return None
        row = conn.execute(_NEWEST).fetchone()
        mark = conn.execute(SQLITE.bus_high_water).fetchone()
        return JournalMark(0 if mark is None else int(mark[0]), _time(row[0] if row else None))


def events_after(
    path: Path, key: VaultKey | None, position: int, kind: BusEventKind
) -> list[MarkedEvent]:
    """The bus events of `kind` numbered past `position`, in order."""
    with integrity.reading(path, key) as conn:
        rows = conn.execute(
            "SELECT seq, body_json, at FROM bus_events WHERE seq > ? AND kind = ? ORDER BY seq",
            (position, kind.value),
        ).fetchall()
    return [MarkedEvent(int(seq), loads(body_json), str(at)) for seq, body_json, at in rows]


def lacking(path: Path, key: VaultKey | None, task_ids: Sequence[str]) -> list[str]:
    """Those of `task_ids` the journal has no task for, in their order."""
    present: set[str] = set()
    with integrity.reading(path, key) as conn:
        for i in range(0, len(task_ids), _CHUNK):
            chunk = list(task_ids[i : i + _CHUNK])
            marks = ", ".join("?" for _ in chunk)
            present.update(
                str(r[0])
                for r in conn.execute(
                    f"SELECT task_id FROM task_journal WHERE task_id IN ({marks})", chunk
                )
            )
    return [t for t in task_ids if t not in present]


def append_past(
    path: Path,
    key: VaultKey | None,
    *,
    past: int,
    kind: BusEventKind,
    body: Mapping[str, object],
    at: str,
) -> int:
    """Append the bus event `kind` numbered past event `past`, in one transaction on a
    journal no kernel runs on; its number. The numbers between are never given: a
    subscriber that saw event N before a loss never sees another event N."""
    conn = cast(JournalConnection, connect(path, key=key, factory=JournalConnection))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT INTO sqlite_sequence(name, seq) SELECT 'bus_events', 0 "
                "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'bus_events')"
            )
            conn.execute(
                "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'bus_events'",
                (past,),
            )
            bus_sql.append_txn(conn, kind, None, body, at)
            seq = bus_sql.high_water(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return seq


class MarkListener(Protocol):
    """Told of each commit of a running kernel's journal, with its position after it."""

    def committed(self, position: int) -> None: ...

    def unreadable(self, why: str) -> None:
        """The position could not be read inside a commit (`why`); the commit goes on."""


class BusMarkWatcher:
    """The SQLite writer's commit watcher (group_commit.CommitWatcher) that reads the
    bus's high-water mark inside each commit that appended an event, and tells
    `listener` after the COMMIT is durable (kernel/acknowledging.py)."""

    def __init__(self, listener: MarkListener, position: int) -> None:
        self._listener = listener
        self._seen = position  # read inside the transaction being committed
        self._cursor: sqlite.Cursor | None = None
        self._appended = bus_sql.APPENDED[0]  # bus events appended at the last read

    def inside(self, tx: Tx) -> None:
        appended = bus_sql.APPENDED[0]
        if appended == self._appended:
            return  # no event was appended since the last read: the mark did not move
        self._appended = appended
        try:
            assert isinstance(tx, sqlite.Connection)  # the writer of a SQLite journal
            if self._cursor is None or self._cursor.connection is not tx:
                # a plain cursor of its own, kept: the vault connection's translating
                # cursor, made anew for each statement, cost five times the read itself
                self._cursor = sqlite.Cursor(tx)
            row = self._cursor.execute(SQLITE.bus_high_water).fetchone()
            self._seen = 0 if row is None else int(row[0])
        except (sqlite.Error, PfarError) as exc:  # the commit goes on; the record lags
            self._listener.unreadable(str(exc))

    def committed(self) -> None:
        self._listener.committed(self._seen)


def _has_bus(conn: sqlite.Connection) -> bool:
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
        "AND name IN ('bus_events', 'task_journal', 'kernel_boots')"
    ).fetchone()
    return bool(found and found[0] == 3)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
