"""SQL for `task_journal`: the one place that reads and writes task rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from .records import TaskRecord, dumps, loads
from .states import PAUSE_REQUESTED, TERMINAL, TaskState

_COLUMNS = (
    "task_id, template_id, principal, trigger_event, state, state_detail, phase, plan_json, "
    "execute_progress, extracted_metadata, data_ceiling, output_sinks, trace_id, created_at, "
    "updated_at, error, event_id, template_hash, recovery_attempts"
)
# must read exactly as the partial index idx_task_journal_unfinished's WHERE clause
_TERMINAL_SQL = "'Completed', 'Failed', 'Abandoned', 'Cancelled'"
assert {s.value for s in TERMINAL} == {"Completed", "Failed", "Abandoned", "Cancelled"}


def _row(row: Sequence[Any]) -> TaskRecord:
    return TaskRecord(
        task_id=row[0],
        template_id=row[1],
        principal=row[2],
        trigger_event=loads(row[3]),
        state=TaskState(row[4]),
        detail=loads(row[5]) or {},
        phase=row[6],
        plan=loads(row[7]),
        execute_progress=loads(row[8]),
        extracted_metadata=loads(row[9]),
        data_ceiling=row[10],
        output_sinks=loads(row[11]),
        trace_id=row[12],
        created_at=row[13],
        updated_at=row[14],
        error=row[15],
        event_id=row[16],
        template_hash=row[17],
        recovery_attempts=int(row[18]),
    )


def insert_txn(conn: sqlite3.Connection, task: TaskRecord) -> None:
    conn.execute(
        f"INSERT INTO task_journal ({_COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            task.task_id,
            task.template_id,
            task.principal,
            None if task.trigger_event is None else dumps(task.trigger_event),
            task.state.value,
            dumps(task.detail),
            task.phase,
            None if task.plan is None else dumps(task.plan),
            None if task.execute_progress is None else dumps(task.execute_progress),
            None if task.extracted_metadata is None else dumps(task.extracted_metadata),
            task.data_ceiling,
            dumps(task.output_sinks),
            task.trace_id,
            task.created_at,
            task.updated_at,
            task.error,
            task.event_id,
            task.template_hash,
            task.recovery_attempts,
        ),
    )


def get(conn: sqlite3.Connection, task_id: str) -> TaskRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else _row(row)


def update_txn(conn: sqlite3.Connection, task_id: str, **fields: Any) -> None:
    """Set columns by name; JSON-valued columns are serialised here."""
    json_cols = {
        "state_detail",
        "plan_json",
        "execute_progress",
        "extracted_metadata",
        "trigger_event",
    }
    sets, values = [], []
    for name, value in fields.items():
        if name in json_cols and value is not None:
            value = dumps(value)
        elif isinstance(value, TaskState):
            value = value.value
        sets.append(f"{name} = ?")
        values.append(value)
    values.append(task_id)
    conn.execute(f"UPDATE task_journal SET {', '.join(sets)} WHERE task_id = ?", values)


def progress_txn(
    conn: sqlite3.Connection, task_id: str, detail: dict[str, Any], progress: dict[str, Any]
) -> None:
    conn.execute(
        "UPDATE task_journal SET state_detail = ?, execute_progress = ?, recovery_attempts = 0 "
        "WHERE task_id = ?",
        (dumps(detail), dumps(progress), task_id),
    )


def clear_detail_key_txn(conn: sqlite3.Connection, task_id: str, key: str) -> None:
    conn.execute(
        "UPDATE task_journal SET state_detail = json_remove(state_detail, ?) WHERE task_id = ?",
        (f"$.{key}", task_id),
    )


def latest_workflow_task(conn: sqlite3.Connection, directory: str) -> str | None:
    row = conn.execute(
        "SELECT task_id FROM task_journal WHERE template_id LIKE 'workflow:%' "
        "AND json_extract(trigger_event, '$.payload.directory') = ? "
        "ORDER BY created_at DESC LIMIT 1",
        (directory,),
    ).fetchone()
    return None if row is None else str(row[0])


def get_state(conn: sqlite3.Connection, task_id: str) -> tuple[TaskState, str] | None:
    row = conn.execute(
        "SELECT state, phase FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else (TaskState(row[0]), str(row[1]))


def get_state_detail(
    conn: sqlite3.Connection, task_id: str
) -> tuple[TaskState, str, dict[str, Any]] | None:
    row = conn.execute(
        "SELECT state, phase, state_detail FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else (TaskState(row[0]), str(row[1]), loads(row[2]) or {})


def executing_hold(conn: sqlite3.Connection, task_id: str) -> tuple[TaskState, bool] | None:
    """A task's state and whether the owner's pause request stands, read on every step
    commit: SQLite picks the one key out of the detail, no JSON is decoded here."""
    row = conn.execute(
        "SELECT state, json_extract(state_detail, ?) FROM task_journal WHERE task_id = ?",
        (f"$.{PAUSE_REQUESTED}", task_id),
    ).fetchone()
    return None if row is None else (TaskState(row[0]), bool(row[1]))


def unfinished(conn: sqlite3.Connection) -> list[TaskRecord]:
    """Every task not in a terminal state, through the partial index (oldest first)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM task_journal INDEXED BY idx_task_journal_unfinished "
        f"WHERE state NOT IN ({_TERMINAL_SQL})"
    ).fetchall()
    return sorted((_row(r) for r in rows), key=lambda t: t.updated_at)


def listing(
    conn: sqlite3.Connection, states: Iterable[str] | None = None, limit: int = 50
) -> list[TaskRecord]:
    wanted = list(states or [])
    if wanted:
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM task_journal WHERE state IN ({marks}) "
            "ORDER BY updated_at DESC LIMIT ?",
            (*wanted, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM task_journal ORDER BY updated_at DESC LIMIT ?", (limit,)
        ).fetchall()
    return [_row(r) for r in rows]


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        state: n
        for state, n in conn.execute("SELECT state, count(*) FROM task_journal GROUP BY state")
    }


def delete_finished_before_txn(conn: sqlite3.Connection, states: Sequence[str], cutoff: str) -> int:
    marks = ", ".join("?" for _ in states)
    cur = conn.execute(
        f"DELETE FROM task_journal WHERE state IN ({marks}) AND updated_at < ?",
        (*states, cutoff),
    )
    return cur.rowcount
