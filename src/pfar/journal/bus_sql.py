"""The event bus's SQL (`bus_events`, `bus_offsets`): typed task events, appended in the
transaction of the move they describe, read in order from a subscriber's offset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import MalformedRow
from .json_text import JsonObject
from .records import dumps, loads
from .states import TaskState
from .tx import Tx


class BusEventKind(StrEnum):
    """What a bus event says happened (seed 001's names; Paused, Resumed, Abandoned and
    the two that are no task's move are pfar's own). The value is the stored text."""

    TaskCreated = "TaskCreated"
    TaskStarted = "TaskStarted"
    TaskQueued = "TaskQueued"
    TaskScheduled = "TaskScheduled"
    TaskResumed = "TaskResumed"
    TaskPaused = "TaskPaused"
    TaskBlocked = "TaskBlocked"
    UserInputNeeded = "UserInputNeeded"
    TaskCompleted = "TaskCompleted"
    TaskFailed = "TaskFailed"
    TaskCancelled = "TaskCancelled"
    TaskAbandoned = "TaskAbandoned"
    TaskRecovered = "TaskRecovered"  # a start's recovery decided for the task (task_writes.py)
    TaskRetried = "TaskRetried"  # the owner retried a Failed task (journal/holds.py)
    LearningExtracted = "LearningExtracted"  # a learning kept (task_writes.py)
    VaultLossAccepted = "VaultLossAccepted"  # `pfar vault accept-loss` (kernel/vault_start.py)


K = BusEventKind
# the event a task's arrival in a state is
ARRIVAL: dict[TaskState, BusEventKind] = {
    TaskState.AwaitingApproval: K.UserInputNeeded,
    TaskState.AwaitingCredential: K.UserInputNeeded,
    TaskState.WaitingForUser: K.UserInputNeeded,
    TaskState.Blocked: K.TaskBlocked,
    TaskState.Queued: K.TaskQueued,
    TaskState.Paused: K.TaskPaused,
    TaskState.Completed: K.TaskCompleted,
    TaskState.Failed: K.TaskFailed,
    TaskState.Cancelled: K.TaskCancelled,
    TaskState.Abandoned: K.TaskAbandoned,
}


@dataclass(frozen=True, slots=True)
class BusEvent:
    seq: int
    kind: BusEventKind
    task_id: str | None
    body: JsonObject
    at: str

    def to_json(self) -> JsonObject:
        return {
            "seq": self.seq,
            "kind": self.kind.value,
            "task_id": self.task_id,
            **self.body,
            "at": self.at,
        }


def moved_txn(
    conn: Tx,
    task_id: str,
    before: TaskState,
    after: TaskState,
    at: str,
    *,
    by: str | None = None,
    detail: JsonObject | None = None,
) -> None:
    """The event of a task's move from `before` to `after`, if the move is one; `by`
    (who moved it: the owner's pause, resume, cancel or retry) and `detail` go in its
    body."""
    if after is before:
        return
    kind = ARRIVAL.get(after)
    if kind is None and after.working and before is TaskState.Failed:
        kind = K.TaskRetried  # the owner's retry: the only move out of Failed
    elif kind is None and after.working and before is TaskState.Queued:
        kind = K.TaskScheduled  # the scheduler let it start (seed 001, 1.2)
    elif kind is None and after.working and (before.parked or before.held):
        kind = K.TaskResumed
    if kind is None:
        return  # a runner's move between its own working states: no event
    body: JsonObject = {"state": after.value, "from": before.value}
    if kind is K.UserInputNeeded:
        body["waits_for"] = {
            TaskState.AwaitingApproval: "approval",
            TaskState.AwaitingCredential: "credential",
        }.get(after, "message")
    if by:
        body["by"] = by
    body.update(detail or {})
    append_txn(conn, kind, task_id, body, at)


def created_txn(conn: Tx, task_id: str, kind: str, state: TaskState, at: str) -> None:
    """A task's creation: created and started, or, created straight into the queue (no
    slot free), created and queued; such a task starts with its TaskScheduled."""
    body = {"task_kind": kind, "state": state.value}
    append_txn(conn, K.TaskCreated, task_id, body, at)
    started = K.TaskQueued if state is TaskState.Queued else K.TaskStarted
    append_txn(conn, started, task_id, body, at)


# events this process appended, counted as they are inserted (whether their transaction
# then commits or not): a reader of the high-water mark after each commit reads it
# again only when this moved (journal/sqlite/marks.py). Only ever grows.
APPENDED = [0]


def append_txn(
    conn: Tx, kind: BusEventKind, task_id: str | None, body: Mapping[str, object], at: str
) -> None:
    conn.execute(
        "INSERT INTO bus_events(kind, task_id, body_json, at) VALUES (?, ?, ?, ?)",
        (kind.value, task_id, dumps(body), at),
    )
    APPENDED[0] += 1


def since(conn: Tx, after: int, limit: int) -> list[BusEvent]:
    rows = conn.execute(
        "SELECT seq, kind, task_id, body_json, at FROM bus_events WHERE seq > ? "
        "ORDER BY seq LIMIT ?",
        (after, limit),
    ).fetchall()
    return [_event(r) for r in rows]


def _event(row: tuple[Any, ...]) -> BusEvent:
    """A `bus_events` row (seq, kind, task, body, at): a kind this pfar does not know is
    refused by name (MalformedRow), never read as another."""
    try:
        kind = BusEventKind(row[1])
    except ValueError:
        raise MalformedRow("bus event", str(row[0]), "kind", str(row[1])) from None
    return BusEvent(row[0], kind, row[2], dict(loads(row[3]) or {}), row[4])


def for_task(conn: Tx, task_id: str, kinds: frozenset[BusEventKind]) -> list[BusEvent]:
    """The task's events of `kinds`, in commit order (its pauses and resumes, say)."""
    marks = ", ".join("?" for _ in kinds)
    rows = conn.execute(
        "SELECT seq, kind, task_id, body_json, at FROM bus_events "
        f"WHERE task_id = ? AND kind IN ({marks}) ORDER BY seq",
        (task_id, *sorted(k.value for k in kinds)),
    ).fetchall()
    return [_event(r) for r in rows]


def high_water(conn: Tx) -> int:
    """The journal's position: every task's creation and move appends an event in its
    own commit, so a journal that lost commits has a lower mark (vault/acknowledged.py)."""
    row = conn.execute(conn.dialect.bus_high_water).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def last_seq(conn: Tx) -> int:
    row = conn.execute("SELECT max(seq) FROM bus_events").fetchone()
    return int(row[0] or 0)


def offset(conn: Tx, subscriber: str) -> int | None:
    row = conn.execute("SELECT seq FROM bus_offsets WHERE subscriber = ?", (subscriber,)).fetchone()
    return None if row is None else int(row[0])


def ack_txn(conn: Tx, subscriber: str, seq: int, at: str) -> None:
    """The subscriber handled every event up to `seq` (an offset never goes back)."""
    conn.execute(conn.dialect.ack_offset, (subscriber, seq, at))


def prune_before_txn(conn: Tx, cutoff: str) -> None:
    """Events older than `cutoff`, but a kept task's retries: its retry count (and the
    key of each failure's notice) is read from them (journal/moves.py)."""
    conn.execute(
        "DELETE FROM bus_events WHERE at < ? AND NOT (kind = ? AND task_id IN "
        "(SELECT task_id FROM task_journal))",
        (cutoff, BusEventKind.TaskRetried.value),
    )
