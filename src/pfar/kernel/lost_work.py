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
from datetime import UTC, datetime
from pathlib import Path

from ..journal.sqlite import marks
from ..journal.sqlite.marks import JournalMark
from ..vault.home import Home
from ..vault.keys import VaultKey

_TASK_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

__all__ = ["JournalMark", "missing_tasks"]


def missing_tasks(home: Home, key: VaultKey | None, since: datetime | None) -> list[str]:
    """The task ids the audit log, owner.log and workspaces/ name after `since` that the
    journal in the vault lacks, in the order they were first named."""
    named: dict[str, datetime] = {}
    for path in (home.audit_log, home.owner_log):
        for task_id, at in _named_in(path):
            if since is None or at > since:
                named.setdefault(task_id, at)
    for task_id, at in _workspaces(home.workspaces_dir):
        if since is None or at > since:
            named.setdefault(task_id, at)
    ordered = sorted(named, key=lambda t: named[t])
    return marks.lacking(home.sessions_db, key, ordered)


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
