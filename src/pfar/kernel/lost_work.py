"""What a journal that went back in time lost: where it stands, and the tasks the rest
of the home still names that it no longer has.

A journal loses a suffix (a deleted write-ahead log, an older copy put back): what it
lacks happened after the newest thing it still holds. The audit log and `owner.log`
are written beside it, not in it, and `workspaces/` holds a directory per task; a task
id they name after that moment that the journal does not have is a lost task. (A task
pruned by the journal's retention is older than what the journal still holds, and is
not named.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..journal.sqlite.dialect import SQLITE
from ..vault.driver import sqlite
from ..vault.home import Home

_TASK_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
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


def has_bus(conn: sqlite.Connection) -> bool:
    """Whether the database on `conn` is a journal with an event bus (a pfar journal
    since the bus's migration)."""
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
        "AND name IN ('bus_events', 'task_journal', 'kernel_boots')"
    ).fetchone()
    return bool(found and found[0] == 3)


def journal_mark(conn: sqlite.Connection) -> JournalMark:
    row = conn.execute(_NEWEST).fetchone()
    mark = conn.execute(SQLITE.bus_high_water).fetchone()
    return JournalMark(0 if mark is None else int(mark[0]), _time(row[0] if row else None))


def missing_tasks(home: Home, conn: sqlite.Connection, since: datetime | None) -> list[str]:
    """The task ids the audit log, owner.log and workspaces/ name after `since` that the
    journal on `conn` lacks, in the order they were first named."""
    named: dict[str, datetime] = {}
    for path in (home.audit_log, home.owner_log):
        for task_id, at in _named_in(path):
            if since is None or at > since:
                named.setdefault(task_id, at)
    for task_id, at in _workspaces(home.workspaces_dir):
        if since is None or at > since:
            named.setdefault(task_id, at)
    ordered = sorted(named, key=lambda t: named[t])
    present: set[str] = set()
    for i in range(0, len(ordered), _CHUNK):
        chunk = ordered[i : i + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        present.update(
            str(r[0])
            for r in conn.execute(
                f"SELECT task_id FROM task_journal WHERE task_id IN ({marks})", chunk
            )
        )
    return [t for t in ordered if t not in present]


def _named_in(path: Path) -> Iterator[tuple[str, datetime]]:
    """(task id, when) of each JSON line of `path` that names a task; lines that are
    not such JSON (a line cut off by a crash) are passed over."""
    try:
        f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        return
    with f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            task_id, at = record.get("task_id"), _time(record.get("at"))
            if isinstance(task_id, str) and _TASK_ID.fullmatch(task_id) and at is not None:
                yield task_id, at


def _workspaces(directory: Path) -> Iterator[tuple[str, datetime]]:
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if not _TASK_ID.fullmatch(entry.name):
            continue
        try:
            made = entry.stat().st_mtime
        except OSError:
            continue
        yield entry.name, datetime.fromtimestamp(made, UTC)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
