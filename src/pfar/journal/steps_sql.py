"""SQL for `task_steps`: one row per plan step, appended, never a growing blob."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .json_text import JSON, JsonValue
from .records import Idempotency, Semantics, StepRecord, StepStatus, dumps, loads
from .rows import StepProcess
from .tx import Tx

_COLUMNS = (
    "task_id, step, tool, semantics, idempotency, status, args_json, result_json, label, "
    "started_at, completed_at, error"
)


# a step's three kinds, looked up by their text (every step row read has them); a text
# not among them goes to the enum, which refuses it as before
_SEMANTICS = {m.value: m for m in Semantics}
_IDEMPOTENCY = {m.value: m for m in Idempotency}
_STATUS = {m.value: m for m in StepStatus}


def _row(row: Sequence[Any]) -> StepRecord:
    return StepRecord(
        task_id=row[0],
        step=int(row[1]),
        tool=row[2],
        semantics=_SEMANTICS.get(row[3]) or Semantics(row[3]),
        idempotency=_IDEMPOTENCY.get(row[4]) or Idempotency(row[4]),
        status=_STATUS.get(row[5]) or StepStatus(row[5]),
        args=loads(row[6]),
        result=loads(row[7]),
        label=row[8],
        started_at=row[9],
        completed_at=row[10],
        error=row[11],
    )


def start_txn(conn: Tx, rec: StepRecord) -> None:
    """Record that a step is about to run (or re-run: a retry overwrites `started`)."""
    conn.execute(
        f"INSERT INTO task_steps ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, NULL, NULL) "
        "ON CONFLICT(task_id, step) DO UPDATE SET status = excluded.status, "
        "started_at = excluded.started_at, tool = excluded.tool, args_json = excluded.args_json, "
        "semantics = excluded.semantics, idempotency = excluded.idempotency, error = NULL",
        (
            rec.task_id,
            rec.step,
            rec.tool,
            rec.semantics.value,
            rec.idempotency.value,
            StepStatus.started.value,
            dumps(rec.args),
            rec.label,
            rec.started_at,
        ),
    )


def finish_txn(conn: Tx, rec: StepRecord) -> None:
    """Record a step's outcome; inserts the row when its start was never journaled (reads)."""
    conn.execute(
        f"INSERT INTO task_steps ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(task_id, step) DO UPDATE SET status = excluded.status, "
        "result_json = excluded.result_json, label = excluded.label, "
        "completed_at = excluded.completed_at, error = excluded.error",
        (
            rec.task_id,
            rec.step,
            rec.tool,
            rec.semantics.value,
            rec.idempotency.value,
            rec.status.value,
            dumps(rec.args),
            dumps(rec.result),
            rec.label,
            rec.started_at,
            rec.completed_at,
            rec.error,
        ),
    )


def set_process_txn(conn: Tx, task_id: str, step: int, process: StepProcess) -> None:
    conn.execute(
        "UPDATE task_steps SET process_json = ? WHERE task_id = ? AND step = ?",
        (dumps(process), task_id, step),
    )


def started_processes(conn: Tx, task_id: str | None = None) -> list[tuple[str, int, StepProcess]]:
    """(task_id, step, process) of steps still marked started that recorded a process
    (of one task, or of all)."""
    sql = (
        "SELECT task_id, step, process_json FROM task_steps "
        "WHERE status = 'started' AND process_json IS NOT NULL"
    )
    rows = (
        conn.execute(sql + " AND task_id = ?", (task_id,)).fetchall()
        if task_id is not None
        else conn.execute(sql).fetchall()
    )
    return [(str(r[0]), int(r[1]), _process(loads(r[2]))) for r in rows]


def _process(found: JSON) -> StepProcess:
    return StepProcess(pid=int(found["pid"]), start_time=int(found["start_time"]))


def in_flight(conn: Tx) -> list[StepRecord]:
    """Every step still marked started (through the partial index: cheap however long
    the history): writes whose outcome a crash left unknown."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM {conn.dialect.started_steps} WHERE status = 'started'"
    ).fetchall()
    return [_row(r) for r in rows]


def for_task(conn: Tx, task_id: str) -> list[StepRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM task_steps WHERE task_id = ? ORDER BY step", (task_id,)
    ).fetchall()
    return [_row(r) for r in rows]


def results_for_task(conn: Tx, task_id: str) -> list[tuple[int, JsonValue]]:
    """(step, result) of each of the task's steps, in order: what a synthesis reads."""
    rows = conn.execute(
        "SELECT step, result_json FROM task_steps WHERE task_id = ? ORDER BY step", (task_id,)
    ).fetchall()
    return [(int(r[0]), loads(r[1])) for r in rows]


def get(conn: Tx, task_id: str, step: int) -> StepRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM task_steps WHERE task_id = ? AND step = ?", (task_id, step)
    ).fetchone()
    return None if row is None else _row(row)


def cut_off_txn(conn: Tx, task_id: str, at: str, error: str) -> list[int]:
    """Mark the task's steps still running as cut off by a cancel; their numbers."""
    steps = [
        int(r[0])
        for r in conn.execute(
            "SELECT step FROM task_steps WHERE task_id = ? AND status = 'started'", (task_id,)
        )
    ]
    conn.execute(
        "UPDATE task_steps SET status = ?, completed_at = ?, error = ? "
        "WHERE task_id = ? AND status = 'started'",
        (StepStatus.cancelled.value, at, error, task_id),
    )
    return steps


def writes_since(conn: Tx, task_id: str, since: str) -> int:
    """How many of the task's writes started at or after `since` (an RFC 3339 time)."""
    row = conn.execute(
        "SELECT count(*) FROM task_steps WHERE task_id = ? AND semantics = 'Write' "
        "AND started_at >= ?",
        (task_id, since),
    ).fetchone()
    return int(row[0])
