"""The owner's hold on a task (pause, resume, cancel) as journal transactions.

Each function runs inside one journal commit and decides from the row as it is in
that commit: a runner's write queued in the same batch is ordered before or after
it, never through it (the state machine refuses a runner's move out of Paused or
Cancelling, and a step's row once its task stopped executing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from ..errors import IllegalTransition, MalformedTaskRow, TaskStateRefused, UnknownTask
from . import approvals_sql, loops_sql, payloads, steps_sql, tasks_sql
from .payloads import Payload
from .records import TaskUpdate, now_rfc3339
from .states import TaskState
from .tx import Tx


class TransitionTxn(Protocol):
    """A task's checked move (moves.transition_txn): the state the task is now in;
    `by` is who moved it, kept in the move's bus event."""

    def __call__(
        self,
        conn: Tx,
        task_id: str,
        to: Payload,
        update: TaskUpdate,
        reset_attempts: bool,
        *,
        by: str | None = None,
        retrying: bool = False,
    ) -> TaskState: ...


CANCELLED_ERROR = "cancelled by the owner"
CUT_OFF = "cut off by the owner's cancel while it ran: it may have had (some of) its effects"
_NOTHING = TaskUpdate()


class PauseOutcome(StrEnum):
    paused = "paused"  # it held no coroutine: Paused now
    requested = "requested"  # it runs: it pauses at its next boundary (a step's end)
    already = "already"  # Paused already, or its pause request already stands


class ResumeOutcome(StrEnum):
    resumed = "resumed"  # back in the state it was paused from
    withdrawn = "withdrawn"  # it had not reached its boundary yet: the request is withdrawn


class CancelOutcome(StrEnum):
    cancelled = "cancelled"  # Cancelled now, by this request
    already_cancelled = "already_cancelled"  # a cancel running alongside finished it first


# what a cancel, pause or resume did (the values never meet: one text, one outcome)
HoldOutcome = CancelOutcome | PauseOutcome | ResumeOutcome
HOLD_OUTCOMES: dict[str, HoldOutcome] = {
    o.value: o for kind in (CancelOutcome, PauseOutcome, ResumeOutcome) for o in kind
}


@dataclass(frozen=True, slots=True)
class CancelIntent:
    """What the committed intent to cancel found: the state it cancelled the task in and
    the owner's questions it withdrew (`already`: the intent was committed before)."""

    from_state: TaskState
    approvals: list[str]
    prompts: list[str]
    already: bool = False


def _row(conn: Tx, task_id: str) -> tuple[TaskState, Payload]:
    current = tasks_sql.get_state_payload(conn, task_id)
    if current is None:
        raise UnknownTask(task_id)
    state, _, payload = current
    return state, payload


def _ended(task_id: str, state: TaskState, action: str) -> TaskStateRefused:
    return TaskStateRefused(task_id, state.value, action, "it has already ended")


def pause_now_txn(
    conn: Tx, task_id: str, transition: TransitionTxn, by: str | None = None
) -> TaskState:
    """Paused now, holding the payload it goes back to (no coroutine holds the task);
    by `by`, or by whoever asked for the pause that stands."""
    state, payload = _row(conn, task_id)
    if not isinstance(payload, payloads.Working):
        raise IllegalTransition(task_id, state.value, TaskState.Paused.value)
    by = by or payloads.pause_by(payload)
    then = replace(payload, pause_requested=False, pause_by=None)
    return transition(conn, task_id, payloads.Paused(then=then), _NOTHING, False, by=by)


def pause_txn(
    conn: Tx,
    task_id: str,
    running: Callable[[], bool],
    transition: TransitionTxn,
    by: str | None = None,
) -> tuple[TaskState, PauseOutcome]:
    """`running()` says, at commit time, whether a coroutine holds the task: then it is
    asked to pause at its next boundary, else it is Paused now."""
    state, payload = _row(conn, task_id)
    if state is TaskState.Paused:
        return state, PauseOutcome.already
    if state.terminal:
        raise _ended(task_id, state, "paused")
    if state is TaskState.Cancelling:
        raise TaskStateRefused(task_id, state.value, "paused", "it is being cancelled")
    if isinstance(payload, payloads.Queued):  # it holds nothing while it waits: now
        paused = payloads.Paused(then=payload.then)
        return transition(conn, task_id, paused, _NOTHING, False, by=by), PauseOutcome.paused
    if not isinstance(payload, payloads.Working):
        raise TaskStateRefused(
            task_id,
            state.value,
            "paused",
            "it is waiting for the owner's answer and holds nothing meanwhile "
            "(answer its question, or cancel it)",
        )
    if not running():
        return pause_now_txn(conn, task_id, transition, by), PauseOutcome.paused
    if payload.pause_requested:
        return state, PauseOutcome.already
    asked = replace(payload, pause_requested=True, pause_by=by)
    tasks_sql.set_payload_txn(conn, task_id, asked)
    return state, PauseOutcome.requested


def unpause_txn(
    conn: Tx, task_id: str, transition: TransitionTxn, by: str | None = None
) -> tuple[TaskState, ResumeOutcome]:
    state, payload = _row(conn, task_id)
    if isinstance(payload, payloads.Paused):
        resumed = transition(conn, task_id, payload.then, _NOTHING, True, by=by)
        return resumed, ResumeOutcome.resumed
    if isinstance(payload, payloads.Working) and payload.pause_requested:
        withdrawn = replace(payload, pause_requested=False, pause_by=None)
        tasks_sql.set_payload_txn(conn, task_id, withdrawn)
        return state, ResumeOutcome.withdrawn
    if state.terminal:
        raise _ended(task_id, state, "resumed")
    why = "it is being cancelled" if state is TaskState.Cancelling else "it is not paused"
    raise TaskStateRefused(task_id, state.value, "resumed", why)


def retry_txn(
    conn: Tx, task_id: str, transition: TransitionTxn, by: str | None = None
) -> TaskState:
    """The owner's retry of a Failed task whose failure is recoverable: back to the
    working state it failed in (its payload's `then`), by `by`, in one commit with its
    TaskRetried event. Refused, naming the state and why, for any other task: a second
    retry finds it working, not Failed."""
    state, payload = _row(conn, task_id)
    if not isinstance(payload, payloads.Failed):
        why = "it has ended without failing" if state.terminal else "it has not failed"
        only = "only a task that failed recoverably, or a loop's answer that waits for you, is"
        raise TaskStateRefused(task_id, state.value, "retried", f"{why} ({only} retried)")
    if (parent := loops_sql.parent(conn, task_id)) is not None:
        # a failure kept as recoverable before subtasks' failures were made final, too
        raise TaskStateRefused(
            task_id,
            state.value,
            "retried",
            f"it is a subtask of task {parent}, which was given its failure and went on "
            "without it: a subtask is not run again on its own (retry or message the "
            "parent task instead)",
        )
    if not payload.recoverable or payload.then is None:
        task = tasks_sql.get(conn, task_id)
        error = task.error if task is not None and task.error else "no error was kept"
        raise TaskStateRefused(
            task_id, state.value, "retried", f"its failure is not recoverable: {error}"
        )
    return transition(conn, task_id, payload.then, _NOTHING, True, by=by, retrying=True)


def begin_cancel_txn(
    conn: Tx, task_id: str, transition: TransitionTxn, by: str | None = None
) -> CancelIntent:
    """The intent: Cancelling, with the owner's pending questions withdrawn, and who
    cancelled it (`by`, told in the Cancelled event). Needs nothing from the task's
    payload, so that a task whose row is malformed can still be ended."""
    state = tasks_sql.get_state(conn, task_id)
    if state is None:
        raise UnknownTask(task_id)
    if state is TaskState.Cancelling:
        try:
            payload = _row(conn, task_id)[1]
        except MalformedTaskRow:  # where it was cancelled from is unknown: say Cancelling
            return CancelIntent(state, [], [], already=True)
        came = payload.cancelled_from if isinstance(payload, payloads.Cancelling) else state
        return CancelIntent(came, [], [], already=True)
    if state.terminal:
        raise _ended(task_id, state, "cancelled")
    try:
        step = payloads.step_of(_row(conn, task_id)[1]) or 0
    except MalformedTaskRow:
        step = 0
    approvals, prompts = approvals_sql.withdraw_for_task_txn(conn, task_id, now_rfc3339())
    intent = payloads.Cancelling(cancelled_from=state, step=step, by=by)
    transition(conn, task_id, intent, _NOTHING, False)
    return CancelIntent(state, approvals, prompts)


def finish_cancel_txn(conn: Tx, task_id: str, transition: TransitionTxn) -> list[int] | None:
    """Cancelled, with the steps still marked running recorded as cut off (their numbers);
    None when the task was Cancelled already."""
    state = tasks_sql.get_state(conn, task_id)
    if state is None:
        raise UnknownTask(task_id)
    if state is TaskState.Cancelled:
        return None
    if state is not TaskState.Cancelling:
        raise IllegalTransition(task_id, state.value, TaskState.Cancelled.value)
    try:
        payload = _row(conn, task_id)[1]
    except MalformedTaskRow:  # who cancelled it is not known: it still ends
        payload = None
    by = payload.by if isinstance(payload, payloads.Cancelling) else None
    cut = steps_sql.cut_off_txn(conn, task_id, now_rfc3339(), CUT_OFF)
    ended = TaskUpdate(error=CANCELLED_ERROR)
    transition(conn, task_id, payloads.Cancelled(), ended, False, by=by)
    return cut
