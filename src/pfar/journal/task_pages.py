"""The task list a page at a time: which tasks (a filter), from where (a cursor), newest
first by when each was created.

A page ends where its last task stands, and the next one starts after that task's
(created_at, task_id): a key, never an offset. Tasks created meanwhile are newer than
every task already listed, so they land before the first page, and paging on neither
repeats a task nor skips one. (updated_at would not do: a task moving on would jump
from a later page to an earlier one.) The order is idx_task_journal_created's; a window
of time reads that window of the index, not all history.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import tasks_sql
from .records import TaskKind, TaskRecord, UnreadableTask
from .states import TaskState
from .timestamps import parse_rfc3339
from .tx import Tx

_TASK_ID = re.compile(r"[0-9A-Za-z-]{1,64}")


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks a listing shows: each field set narrows it, all of them together."""

    states: tuple[TaskState, ...] = ()  # any of these (none: every state)
    kind: TaskKind | None = None
    template_id: str | None = None
    # created at or after `created_since`, and before `created_until` (RFC 3339, UTC, as
    # the journal writes its timestamps: the text sorts in time order)
    created_since: str | None = None
    created_until: str | None = None
    # a case-insensitive piece of the text the task was started with (its trigger event's)
    text: str | None = None


@dataclass(frozen=True, slots=True)
class TaskCursor:
    """Where a page ended: the last task it listed. Carried as an opaque text."""

    created_at: str
    task_id: str

    def encode(self) -> str:
        raw = f"{self.created_at}\n{self.task_id}".encode()
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        return f"{text}.{_check(raw)}"

    @classmethod
    def decode(cls, text: str) -> TaskCursor:
        """The cursor `encode` wrote.

        Raises:
            ValueError: saying what is wrong with `text` (not one `encode` wrote).
        """
        if not text or len(text) > 200:
            raise ValueError("is not a cursor a page gave (empty or too long)")
        body, _, check = text.partition(".")
        try:
            data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            raw = data.decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ValueError("is not a cursor a page gave (not its encoding)") from None
        if not hmac.compare_digest(check, _check(data)):
            raise ValueError("is not a cursor a page gave (altered or cut short)")
        created_at, sep, task_id = raw.partition("\n")
        if not sep or not _TASK_ID.fullmatch(task_id):
            raise ValueError("is not a cursor a page gave (no task id in it)")
        try:
            moment = parse_rfc3339(created_at)
        except ValueError:
            raise ValueError("is not a cursor a page gave (no time in it)") from None
        if moment.tzinfo is None or not created_at.endswith("Z"):
            raise ValueError("is not a cursor a page gave (its time is not UTC)")
        return cls(created_at, task_id)


@dataclass(frozen=True, slots=True)
class TaskPage:
    """Up to a page of tasks, newest first; `next_cursor` continues after the last one
    (None: this page ends the list)."""

    tasks: list[TaskRecord | UnreadableTask]
    next_cursor: str | None


def _check(raw: bytes) -> str:
    """A check of a cursor's content: one cut short or edited by hand is told apart from
    a page's (it is no secret: a cursor only says where a listing goes on)."""
    return hashlib.sha256(b"pfar task cursor\0" + raw).hexdigest()[:12]


def escape_like(text: str) -> str:
    """`text` as a LIKE pattern matching itself anywhere (`\\` escapes)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def page(conn: Tx, wanted: TaskFilter, after: TaskCursor | None, limit: int) -> TaskPage:
    """Up to `limit` tasks matching `wanted`, created before `after`'s task (when given),
    newest first; a row that cannot be read as a task is listed as UnreadableTask."""
    where: list[str] = []
    values: list[Any] = []
    if wanted.states:
        where.append(f"state IN ({', '.join('?' for _ in wanted.states)})")
        values.extend(s.value for s in wanted.states)
    if wanted.kind is not None:
        where.append("kind = ?")
        values.append(wanted.kind.value)
    if wanted.template_id is not None:
        where.append("template_id = ?")
        values.append(wanted.template_id)
    if wanted.created_since is not None:
        where.append("created_at >= ?")
        values.append(wanted.created_since)
    if wanted.created_until is not None:
        where.append("created_at < ?")
        values.append(wanted.created_until)
    if wanted.text:
        where.append(conn.dialect.input_text_like)
        values.append(escape_like(wanted.text))
    if after is not None:
        # the first term alone bounds the index range; the second breaks a tie of times
        where.append("created_at <= ? AND (created_at < ? OR task_id < ?)")
        values.extend((after.created_at, after.created_at, after.task_id))
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows: Sequence[Any] = conn.execute(
        f"SELECT {tasks_sql.COLUMNS} FROM task_journal {clause}"
        "ORDER BY created_at DESC, task_id DESC LIMIT ?",
        (*values, limit + 1),
    ).fetchall()
    listed = [tasks_sql.listed(r) for r in rows[:limit]]
    if len(rows) <= limit:
        return TaskPage(listed, None)
    last = listed[-1]  # a readable task or not, its row says when it was created
    return TaskPage(listed, TaskCursor(last.created_at, last.task_id).encode())
