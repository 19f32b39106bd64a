"""A task's checked move, inside a store transaction: every family's writes use it.

The row is read inside the transaction that moves it, so the state machine cannot be
raced past; the pause bookkeeping (a move into another working state while the
owner's pause request stands lands in Paused) lives here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..errors import IllegalTransition, MalformedTaskRow, UnknownTask
from . import approvals_sql, bus_sql, loops_sql, payloads, tasks_sql
from .json_text import JsonObject
from .message_keys import FailedKey
from .payloads import Payload, state_of
from .records import ApprovalRecord, OwnerMessage, TaskUpdate, now_rfc3339
from .states import TERMINAL, TaskState, check_transition
from .tx import Tx

NO_UPDATE = TaskUpdate()


def transition_txn(
    conn: Tx,
    task_id: str,
    to: Payload,
    update: TaskUpdate = NO_UPDATE,
    reset_attempts: bool = True,
    *,
    boundary: bool = False,
    by: str | None = None,
    retrying: bool = False,
) -> TaskState:
    """Move the task (checked against its row); return the state it is now in.

    The journal keeps the pause bookkeeping: Paused holds the payload it goes back
    to, leaving it goes back only there, and a runner's move into another working
    state while the owner's pause request stands lands in Paused instead (that
    move is the boundary where the task stops). A self-loop is no boundary (the
    request rides on to the next one) unless the caller says it is (`boundary`: the
    loop's model answered, and its tool calls have not started).

    `by` is who moved it, through which surface (the owner's hold: `str(Actor)`), kept
    in the move's bus event; a pause reached at a boundary is the requester's
    (`pause_by` of the request).

    A move into Failed gets where the task was (`then`, when its failure is recoverable)
    and how many times it was retried; `retrying` is the owner's retry, the only move
    out of Failed (journal/holds.py).
    """
    dst = state_of(to)
    state, phase, current = _row_for_move(conn, task_id, dst)
    check_transition(
        task_id,
        state,
        dst,
        payloads.paused_from(current) if current else None,
        retrying=retrying,
    )
    if isinstance(to, payloads.Failed):
        to = _failed(conn, task_id, to, current)
    queued_then = current.then if isinstance(current, payloads.Queued) else None
    if (
        isinstance(to, payloads.Paused)
        and state_of(to.then) is not state
        and to.then != queued_then
    ):
        # a task pauses holding the state it is in, so that it goes back only there
        raise IllegalTransition(task_id, state.value, f"Paused (back to {to.then.kind})")
    requested = payloads.pause_requested(to) or (
        current is not None and payloads.pause_requested(current)
    )
    asked_by = payloads.pause_by(to) or payloads.pause_by(current)
    if isinstance(to, payloads.Working):
        stops = requested and (dst is not state or boundary) and state is not TaskState.Paused
        rides = requested and dst is state and not stops
        to = replace(to, pause_requested=rides, pause_by=asked_by if rides else None)
        if stops:
            to = payloads.Paused(then=to)
    elif isinstance(to, payloads.Queued) and requested:
        # being queued is a boundary too: the owner's pause lands here
        to = payloads.Paused(then=replace(to.then, pause_requested=False, pause_by=None))
    at = now_rfc3339()
    detail: JsonObject | None = None
    if retrying:  # the failure retried, told with the retry (the row's error is cleared)
        failed = tasks_sql.get(conn, task_id)
        error = (failed.error if failed else None) or ""
        detail = {"error": error, "retry": retries_txn(conn, task_id) + 1}
        update = replace(update, error="")
    tasks_sql.transition_txn(conn, task_id, to, dst.phase or phase, update, at, reset_attempts)
    after = state_of(to)
    if after is TaskState.Paused and by is None:
        by = asked_by
    # the bus hears of it in this commit
    bus_sql.moved_txn(conn, task_id, state, after, at, by=by, detail=detail)
    return after


def _failed(
    conn: Tx, task_id: str, to: payloads.Failed, current: Payload | None
) -> payloads.Failed:
    """The Failed payload as kept: a recoverable failure holds the working state a retry
    goes back to (none to be had: it is not recoverable), and every failure the number
    of retries before it (the task's TaskRetried events, each in its retry's commit).

    A subtask's failure is never recoverable, whatever failed: its parent is given the
    failure as the Task tool's result and goes on without it, so running the subtask
    again would do work the parent no longer waits for."""
    if to.recoverable and loops_sql.parent(conn, task_id) is not None:
        to = replace(to, recoverable=False, then=None)
    then = to.then
    if to.recoverable and then is None and current is not None:
        then = payloads.resume_point(current)
    return replace(
        to,
        recoverable=to.recoverable and then is not None,
        then=then if to.recoverable else None,
        retry_count=retries_txn(conn, task_id),
    )


def retries_txn(conn: Tx, task_id: str) -> int:
    """How many times the owner retried the task."""
    return len(bus_sql.for_task(conn, task_id, frozenset({bus_sql.BusEventKind.TaskRetried})))


def failure_messages(
    conn: Tx, task_id: str, messages: Sequence[OwnerMessage]
) -> list[OwnerMessage]:
    """The owner's messages of a failure, each failure after a retry its own: the key of
    the task's failure notice is numbered by the retries before it."""
    retries = retries_txn(conn, task_id)
    return [
        replace(m, message_key=FailedKey(task_id, retries))
        if retries and m.message_key == FailedKey(task_id)
        else m
        for m in messages
    ]


def _row_for_move(conn: Tx, task_id: str, dst: TaskState) -> tuple[TaskState, str, Payload | None]:
    """The row's state, phase and payload. A malformed payload stops every move but
    the owner's cancel and an ending, which need nothing from it."""
    try:
        current = tasks_sql.get_state_payload(conn, task_id)
    except MalformedTaskRow:
        if not (dst.terminal or dst is TaskState.Cancelling):
            raise
        found = tasks_sql.get_state_phase(conn, task_id)
        assert found is not None
        return found[0], found[1], None
    if current is None:
        raise UnknownTask(task_id)
    return current


def executing_txn(conn: Tx, task_id: str) -> bool:
    """A step's row is written only while its task executes: once the owner paused
    or cancelled it, a late write of the runner is refused (and undone). Returns
    whether the owner's pause request stands (the task pauses at this step's end)."""
    current = tasks_sql.executing_hold(conn, task_id)
    if current is None:
        raise UnknownTask(task_id)
    state, pause_requested = current
    if state is not TaskState.Executing:
        raise IllegalTransition(task_id, state.value, TaskState.Executing.value)
    return pause_requested


def park_approval_txn(
    conn: Tx,
    approval: ApprovalRecord,
    parked: payloads.AwaitingApproval,
) -> None:
    if parked.approval_id != approval.approval_id:
        raise ValueError(f"task {approval.task_id}: parked on another approval")
    approvals_sql.insert_approval_txn(conn, approval)
    transition_txn(conn, approval.task_id, parked)


def fail_parked_txn(conn: Tx, task_id: str, error: str) -> list[tuple[str, str | None]]:
    # the state alone: a row whose payload cannot be read still times out (and one
    # such row must not hold back every other expiry, nor the kernel's start)
    state = tasks_sql.get_state(conn, task_id)
    if state is None or state in TERMINAL:
        return []
    # a question's deadline passed: recoverable (a retry asks it again)
    transition_txn(conn, task_id, payloads.Failed(recoverable=True), TaskUpdate(error=error))
    return [(task_id, error)]
