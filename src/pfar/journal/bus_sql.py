"""The event bus's SQL (`bus_events`, `bus_offsets`): typed task events, appended in the
transaction of the move they describe, read in order from a subscriber's offset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .json_text import JsonObject
from .records import dumps, loads
from .states import TaskState
from .tx import Tx

# the event a task's arrival in a state is (seed 001's names; Paused, Resumed and
# Abandoned are pfar's own)
ARRIVAL: dict[TaskState, str] = {
    TaskState.AwaitingApproval: "UserInputNeeded",
    TaskState.AwaitingCredential: "UserInputNeeded",
    TaskState.WaitingForUser: "UserInputNeeded",
    TaskState.Blocked: "TaskBlocked",
    TaskState.Queued: "TaskQueued",
    TaskState.Paused: "TaskPaused",
    TaskState.Completed: "TaskCompleted",
    TaskState.Failed: "TaskFailed",
    TaskState.Cancelled: "TaskCancelled",
    TaskState.Abandoned: "TaskAbandoned",
}
KINDS = frozenset({"TaskCreated", "TaskStarted", "TaskResumed", "TaskScheduled", *ARRIVAL.values()})


@dataclass(frozen=True, slots=True)
class BusEvent:
    seq: int
    kind: str
    task_id: str | None
    body: JsonObject
    at: str

    def to_json(self) -> JsonObject:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "task_id": self.task_id,
            **self.body,
            "at": self.at,
        }


def moved_txn(conn: Tx, task_id: str, before: TaskState, after: TaskState, at: str) -> None:
    """The event of a task's move from `before` to `after`, if the move is one."""
    if after is before:
        return
    kind = ARRIVAL.get(after)
    if kind is None and after.working and before is TaskState.Queued:
        kind = "TaskScheduled"  # the scheduler let it start (seed 001, 1.2)
    elif kind is None and after.working and (before.parked or before.held):
        kind = "TaskResumed"
    if kind is None:
        return  # a runner's move between its own working states: no event
    body: JsonObject = {"state": after.value, "from": before.value}
    if kind == "UserInputNeeded":
        body["waits_for"] = {
            TaskState.AwaitingApproval: "approval",
            TaskState.AwaitingCredential: "credential",
        }.get(after, "message")
    append_txn(conn, kind, task_id, body, at)


def created_txn(conn: Tx, task_id: str, kind: str, state: TaskState, at: str) -> None:
    """A task's creation: created and started, or, created straight into the queue (no
    slot free), created and queued; such a task starts with its TaskScheduled."""
    body = {"task_kind": kind, "state": state.value}
    append_txn(conn, "TaskCreated", task_id, body, at)
    started = "TaskQueued" if state is TaskState.Queued else "TaskStarted"
    append_txn(conn, started, task_id, body, at)


# events this process appended, counted as they are inserted (whether their transaction
# then commits or not): a reader of the high-water mark after each commit reads it
# again only when this moved (journal/sqlite/marks.py). Only ever grows.
APPENDED = [0]


def append_txn(
    conn: Tx, kind: str, task_id: str | None, body: Mapping[str, object], at: str
) -> None:
    conn.execute(
        "INSERT INTO bus_events(kind, task_id, body_json, at) VALUES (?, ?, ?, ?)",
        (kind, task_id, dumps(body), at),
    )
    APPENDED[0] += 1


def since(conn: Tx, after: int, limit: int) -> list[BusEvent]:
    rows = conn.execute(
        "SELECT seq, kind, task_id, body_json, at FROM bus_events WHERE seq > ? "
        "ORDER BY seq LIMIT ?",
        (after, limit),
    ).fetchall()
    return [BusEvent(r[0], r[1], r[2], dict(loads(r[3]) or {}), r[4]) for r in rows]


def for_task(conn: Tx, task_id: str, kinds: frozenset[str]) -> list[BusEvent]:
    """The task's events of `kinds`, in commit order (its pauses and resumes, say)."""
    marks = ", ".join("?" for _ in kinds)
    rows = conn.execute(
        "SELECT seq, kind, task_id, body_json, at FROM bus_events "
        f"WHERE task_id = ? AND kind IN ({marks}) ORDER BY seq",
        (task_id, *sorted(kinds)),
    ).fetchall()
    return [BusEvent(r[0], r[1], r[2], dict(loads(r[3]) or {}), r[4]) for r in rows]


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
    conn.execute("DELETE FROM bus_events WHERE at < ?", (cutoff,))
