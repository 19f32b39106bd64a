"""The owner's hold on a task (pause, resume, cancel) as journal transactions.

Each function runs inside one journal commit and decides from the row as it is in
that commit: a runner's write queued in the same batch is ordered before or after
it, never through it (the state machine refuses a runner's move out of Paused or
Cancelling, and a step's row once its task stopped executing).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import IllegalTransition, TaskStateRefused, UnknownTask
from . import approvals_sql, steps_sql, tasks_sql
from .records import now_rfc3339
from .states import PAUSE_REQUESTED, TaskState, paused_from

# (conn, task_id, to, detail, reset_attempts, columns) -> the state the task is now in
TransitionTxn = Callable[
    [sqlite3.Connection, str, TaskState, dict[str, Any] | None, bool, dict[str, Any]], TaskState
]

CANCELLED_FROM = "cancelled_from"  # detail key: the state the owner cancelled the task in
CANCELLED_ERROR = "cancelled by the owner"
CUT_OFF = "cut off by the owner's cancel while it ran: it may have had (some of) its effects"


class PauseOutcome(StrEnum):
    paused = "paused"  # it held no coroutine: Paused now
    requested = "requested"  # it runs: it pauses at its next boundary (a step's end)
    already = "already"  # Paused already, or its pause request already stands


class ResumeOutcome(StrEnum):
    resumed = "resumed"  # back in the state it was paused from
    withdrawn = "withdrawn"  # it had not reached its boundary yet: the request is withdrawn


@dataclass(frozen=True, slots=True)
class CancelIntent:
    """What the committed intent to cancel found: the state it cancelled the task in and
    the owner's questions it withdrew (`already`: the intent was committed before)."""

    from_state: TaskState
    approvals: list[str]
    prompts: list[str]
    already: bool = False


def _row(conn: sqlite3.Connection, task_id: str) -> tuple[TaskState, dict[str, Any]]:
    current = tasks_sql.get_state_detail(conn, task_id)
    if current is None:
        raise UnknownTask(task_id)
    state, _, detail = current
    return state, detail


def _ended(task_id: str, state: TaskState, action: str) -> TaskStateRefused:
    return TaskStateRefused(task_id, state.value, action, "it has already ended")


def pause_txn(
    conn: sqlite3.Connection,
    task_id: str,
    running: Callable[[], bool],
    transition: TransitionTxn,
) -> tuple[TaskState, PauseOutcome]:
    """`running()` says, at commit time, whether a coroutine holds the task: then it is
    asked to pause at its next boundary, else it is Paused now."""
    state, detail = _row(conn, task_id)
    if state is TaskState.Paused:
        return state, PauseOutcome.already
    if state.terminal:
        raise _ended(task_id, state, "paused")
    if state is TaskState.Cancelling:
        raise TaskStateRefused(task_id, state.value, "paused", "it is being cancelled")
    if state.parked:
        raise TaskStateRefused(
            task_id,
            state.value,
            "paused",
            "it is waiting for the owner's answer and holds nothing meanwhile "
            "(answer its question, or cancel it)",
        )
    if not running():
        return transition(conn, task_id, TaskState.Paused, None, False, {}), PauseOutcome.paused
    if detail.get(PAUSE_REQUESTED):
        return state, PauseOutcome.already
    conn.execute(
        "UPDATE task_journal SET state_detail = json_set(state_detail, ?, json('true')) "
        "WHERE task_id = ?",
        (f"$.{PAUSE_REQUESTED}", task_id),
    )
    return state, PauseOutcome.requested


def unpause_txn(
    conn: sqlite3.Connection, task_id: str, transition: TransitionTxn
) -> tuple[TaskState, ResumeOutcome]:
    state, detail = _row(conn, task_id)
    if state is TaskState.Paused:
        back = paused_from(detail)
        if back is None:  # only a hand-edited row can lack it: say so, move nothing
            raise TaskStateRefused(
                task_id, state.value, "resumed", "its row does not say which state it was paused in"
            )
        return transition(conn, task_id, back, None, True, {}), ResumeOutcome.resumed
    if state.working and detail.get(PAUSE_REQUESTED):
        tasks_sql.clear_detail_key_txn(conn, task_id, PAUSE_REQUESTED)
        return state, ResumeOutcome.withdrawn
    if state.terminal:
        raise _ended(task_id, state, "resumed")
    why = "it is being cancelled" if state is TaskState.Cancelling else "it is not paused"
    raise TaskStateRefused(task_id, state.value, "resumed", why)


def begin_cancel_txn(
    conn: sqlite3.Connection, task_id: str, transition: TransitionTxn
) -> CancelIntent:
    """The intent: Cancelling, with the owner's pending questions withdrawn."""
    state, detail = _row(conn, task_id)
    if state is TaskState.Cancelling:
        return CancelIntent(_cancelled_from(detail, state), [], [], already=True)
    if state.terminal:
        raise _ended(task_id, state, "cancelled")
    approvals, prompts = approvals_sql.withdraw_for_task_txn(conn, task_id, now_rfc3339())
    transition(
        conn, task_id, TaskState.Cancelling, {**detail, CANCELLED_FROM: state.value}, False, {}
    )
    return CancelIntent(state, approvals, prompts)


def finish_cancel_txn(
    conn: sqlite3.Connection, task_id: str, transition: TransitionTxn
) -> list[int] | None:
    """Cancelled, with the steps still marked running recorded as cut off (their numbers);
    None when the task was Cancelled already."""
    state, _ = _row(conn, task_id)
    if state is TaskState.Cancelled:
        return None
    if state is not TaskState.Cancelling:
        raise IllegalTransition(task_id, state.value, TaskState.Cancelled.value)
    cut = steps_sql.cut_off_txn(conn, task_id, now_rfc3339(), CUT_OFF)
    transition(conn, task_id, TaskState.Cancelled, None, False, {"error": CANCELLED_ERROR})
    return cut


def _cancelled_from(detail: dict[str, Any], default: TaskState) -> TaskState:
    try:
        return TaskState(str(detail.get(CANCELLED_FROM, default.value)))
    except ValueError:
        return default
