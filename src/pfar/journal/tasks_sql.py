"""SQL for `task_journal`: the one place that reads and writes task rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import MalformedTaskRow
from . import bus_sql, payloads
from .payloads import Payload
from .records import TaskKind, TaskRecord, TaskUpdate, UnreadableTask, dumps, loads
from .rows import LlmCallMade, LlmUsage
from .states import BY_VALUE, TERMINAL, TaskState
from .tx import Tx

COLUMNS = (
    "task_id, template_id, principal, trigger_event, state, state_detail, phase, plan_json, "
    "execute_progress, extracted_metadata, data_ceiling, output_sinks, trace_id, created_at, "
    "updated_at, error, event_id, template_hash, recovery_attempts, kind"
)
# must read exactly as the partial index idx_task_journal_unfinished's WHERE clause
_TERMINAL_SQL = "'Completed', 'Failed', 'Abandoned', 'Cancelled'"
assert {s.value for s in TERMINAL} == {"Completed", "Failed", "Abandoned", "Cancelled"}


def _row(row: Sequence[Any]) -> TaskRecord:
    task_id = row[0]
    return TaskRecord(
        task_id=task_id,
        template_id=row[1],
        principal=row[2],
        trigger_event=loads(row[3]),
        state=_state(task_id, row[4]),
        payload=payloads.loads(task_id, row[4], row[5]),
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
        kind=_kind(task_id, row[19]),
    )


def _state(task_id: str, value: str) -> TaskState:
    found = BY_VALUE.get(value)
    if found is not None:
        return found
    try:
        return TaskState(value)
    except ValueError:
        raise MalformedTaskRow(task_id, "state", f"{value!r} is no task state") from None


_KINDS = {k.value: k for k in TaskKind}


def _kind(task_id: str, value: str) -> TaskKind:
    found = _KINDS.get(value)  # read with every task row, as its state is
    if found is not None:
        return found
    try:
        return TaskKind(value)
    except ValueError:
        known = ", ".join(k.value for k in TaskKind)
        raise MalformedTaskRow(task_id, "kind", f"{value!r} is no runner ({known})") from None


def insert_txn(conn: Tx, task: TaskRecord) -> None:
    conn.execute(
        f"INSERT INTO task_journal ({COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            task.task_id,
            task.template_id,
            task.principal,
            None if task.trigger_event is None else dumps(task.trigger_event),
            task.state.value,
            payloads.dumps(task.payload),
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
            task.kind.value,
        ),
    )
    # the bus hears of it in the same commit (bus_sql.py)
    bus_sql.created_txn(conn, task.task_id, task.kind.value, task.state, task.created_at)


def get(conn: Tx, task_id: str) -> TaskRecord | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else _row(row)


def transition_txn(
    conn: Tx,
    task_id: str,
    payload: Payload,
    phase: str,
    update: TaskUpdate,
    at: str,
    reset_attempts: bool,
) -> None:
    """The row's new state (its payload's kind), phase and payload, and `update`'s
    columns that are set."""
    sets = ["state = ?", "state_detail = ?", "phase = ?", "updated_at = ?"]
    values: list[Any] = [payload.kind, payloads.dumps(payload), phase, at]
    for column, value in (
        ("plan_json", update.plan),
        ("execute_progress", update.execute_progress),
        ("extracted_metadata", update.extracted_metadata),
    ):
        if value is not None:
            sets.append(f"{column} = ?")
            values.append(dumps(value))
    for column, text in (("template_hash", update.template_hash), ("error", update.error)):
        if text is not None:
            sets.append(f"{column} = ?")
            # an empty error clears it (a retried task has none until it fails again)
            values.append(text if text or column != "error" else None)
    if reset_attempts:
        sets.append("recovery_attempts = 0")
    values.append(task_id)
    conn.execute(f"UPDATE task_journal SET {', '.join(sets)} WHERE task_id = ?", values)


def progress_txn(conn: Tx, task_id: str, payload: Payload, progress: dict[str, Any]) -> bool:
    """A step's progress, written only while the task executes and no pause stands (the
    check rides in the UPDATE: one statement on every step commit). False when the row
    was not written: the caller reads the row and decides (Journal._executing_txn). A
    guard that nearly always holds: a backend may check it when the batch settles."""
    cur = conn.execute(
        "UPDATE task_journal SET state_detail = ?, execute_progress = ?, recovery_attempts = 0 "
        f"WHERE task_id = ? AND state = 'Executing' AND {conn.dialect.no_pause_requested}",
        (payloads.dumps(payload), dumps(progress), task_id),
    )
    return conn.matched(cur)


def spend_answers_txn(conn: Tx, task_id: str) -> None:
    """The owner's answers that let a step run are spent by the run that starts now (an
    Executing payload without them is still one: SQLite drops the fields, nothing is
    decoded here)."""
    spent = conn.dialect.without_fields("state_detail", payloads.SPENT_BY_A_RUN)
    conn.execute(f"UPDATE task_journal SET state_detail = {spent} WHERE task_id = ?", (task_id,))


def set_payload_txn(conn: Tx, task_id: str, payload: Payload) -> None:
    """The payload of a task staying in its state (a grant spent, a pause requested)."""
    conn.execute(
        "UPDATE task_journal SET state_detail = ? WHERE task_id = ?",
        (payloads.dumps(payload), task_id),
    )


def latest_workflow_task(conn: Tx, directory: str) -> str | None:
    row = conn.execute(
        "SELECT task_id FROM task_journal WHERE kind = 'workflow' "
        f"AND {conn.dialect.trigger_directory} = ? "
        "ORDER BY created_at DESC LIMIT 1",
        (directory,),
    ).fetchone()
    return None if row is None else str(row[0])


def get_state_payload(conn: Tx, task_id: str) -> tuple[TaskState, str, Payload] | None:
    row = conn.execute(
        "SELECT state, phase, state_detail FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    if row is None:
        return None
    return _state(task_id, row[0]), str(row[1]), payloads.loads(task_id, row[0], row[2])


def get_state(conn: Tx, task_id: str) -> TaskState | None:
    """The state alone: what a malformed payload does not hide (cancel reads only this)."""
    found = get_state_phase(conn, task_id)
    return None if found is None else found[0]


def get_state_phase(conn: Tx, task_id: str) -> tuple[TaskState, str] | None:
    row = conn.execute(
        "SELECT state, phase FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else (_state(task_id, row[0]), str(row[1]))


def progress(conn: Tx, task_id: str) -> dict[str, Any]:
    """The task's execute_progress alone ({} for none): read with every step list."""
    row = conn.execute(
        "SELECT execute_progress FROM task_journal WHERE task_id = ?", (task_id,)
    ).fetchone()
    value = loads(row[0]) if row is not None else None
    return value if isinstance(value, dict) else {}


def executing_hold(conn: Tx, task_id: str) -> tuple[TaskState, bool] | None:
    """A task's state and whether the owner's pause request stands, read on every step
    commit: SQLite picks the one key out of the detail, no JSON is decoded here."""
    row = conn.execute(
        f"SELECT state, {conn.dialect.pause_requested} FROM task_journal WHERE task_id = ?",
        (task_id,),
    ).fetchone()
    return None if row is None else (_state(task_id, row[0]), bool(row[1]))


def unfinished(conn: Tx) -> tuple[list[TaskRecord], list[UnreadableTask]]:
    """Every task not in a terminal state, through the partial index (oldest first), and
    the unfinished rows that could not be read as tasks: reported, never skipped silently."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM {conn.dialect.unfinished_tasks} "
        f"WHERE state NOT IN ({_TERMINAL_SQL})"
    ).fetchall()
    tasks: list[TaskRecord] = []
    malformed: list[UnreadableTask] = []
    for r in rows:
        match listed(r):
            case TaskRecord() as task:
                tasks.append(task)
            case unreadable:
                malformed.append(unreadable)
    return sorted(tasks, key=lambda t: t.updated_at), malformed


def listing(
    conn: Tx, states: Iterable[str] | None = None, limit: int = 50
) -> list[TaskRecord | UnreadableTask]:
    """Tasks newest first; a row that cannot be read as a task is listed as UnreadableTask."""
    wanted = list(states or [])
    if wanted:
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM task_journal WHERE state IN ({marks}) "
            "ORDER BY updated_at DESC LIMIT ?",
            (*wanted, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM task_journal ORDER BY updated_at DESC LIMIT ?", (limit,)
        ).fetchall()
    return [listed(r) for r in rows]


def listed(row: Sequence[Any]) -> TaskRecord | UnreadableTask:
    try:
        return _row(row)
    except MalformedTaskRow as exc:
        return UnreadableTask(
            row[0], row[1], row[4], row[6], row[13], row[14], exc.field, exc.problem
        )


def counts(conn: Tx) -> dict[str, int]:
    return {
        state: n
        for state, n in conn.execute("SELECT state, count(*) FROM task_journal GROUP BY state")
    }


def delete_finished_before_txn(conn: Tx, states: Sequence[str], cutoff: str, limit: int) -> int:
    """Delete up to `limit` tasks in `states` last updated before `cutoff`, with their
    model calls (llm_calls has no foreign key to cascade from); how many tasks."""
    marks = ", ".join("?" for _ in states)
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT task_id FROM task_journal WHERE state IN ({marks}) AND updated_at < ? LIMIT ?",
            (*states, cutoff, limit),
        )
    ]
    if not ids:
        return 0
    conn.executemany("DELETE FROM llm_calls WHERE task_id = ?", [(t,) for t in ids])
    cur = conn.executemany("DELETE FROM task_journal WHERE task_id = ?", [(t,) for t in ids])
    return cur.rowcount


def delete_orphan_llm_calls_txn(conn: Tx, limit: int) -> int:
    """Up to `limit` model calls of tasks that no longer exist (kept by journals from
    before calls were deleted with their task); how many."""
    cur = conn.execute(
        "DELETE FROM llm_calls WHERE call_id IN (SELECT call_id FROM llm_calls c "
        "WHERE NOT EXISTS (SELECT 1 FROM task_journal t WHERE t.task_id = c.task_id) LIMIT ?)",
        (limit,),
    )
    return cur.rowcount


def llm_usage(conn: Tx, task_id: str) -> LlmUsage:
    """A task's model calls: how many, their tokens and their cost."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost_usd), 0) FROM llm_calls WHERE task_id = ?",
        (task_id,),
    ).fetchone()
    # int() and float(): PostgreSQL sums integers as numeric
    return LlmUsage(
        calls=int(row[0]),
        input_tokens=int(row[1]),
        output_tokens=int(row[2]),
        cost_usd=float(row[3]),
    )


def llm_calls(conn: Tx, task_id: str) -> list[LlmCallMade]:
    """A task's model calls in the order they were made (idx_llm_calls_task)."""
    rows = conn.execute(
        "SELECT at, provider, model, input_tokens, output_tokens, cost_usd, priced "
        "FROM llm_calls "
        "WHERE task_id = ? ORDER BY at, call_id",
        (task_id,),
    ).fetchall()
    return [
        LlmCallMade(
            at=r[0],
            provider=r[1],
            model=r[2],
            input_tokens=int(r[3]),
            output_tokens=int(r[4]),
            cost_usd=float(r[5]),
            priced=bool(r[6]),
        )
        for r in rows
    ]
