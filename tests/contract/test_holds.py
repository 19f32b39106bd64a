"""The owner's hold on a task (pause, unpause, cancel, fail) and recovery's decisions,
each one commit that a refusal leaves untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pfar.answers import Approve
from pfar.errors import (
    AlreadyDecided,
    IllegalTransition,
    TaskStateRefused,
)
from pfar.journal import (
    ApprovalStatus,
    StepStatus,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.bus_sql import BusEventKind
from pfar.journal.holds import CANCELLED_ERROR, PauseOutcome, ResumeOutcome
from pfar.journal.records import rfc3339
from pfar.journal.store import Store

from . import builders as b
from .helpers import created, parked, run
from .verbs import covers

S = TaskState


# -- the owner's hold: pause, unpause, cancel ---------------------------------------


@covers("tasks.request_pause", "tasks.unpause")
def test_pause_now_and_unpause_back_to_exactly_the_payload(store: Store) -> None:
    held = p.Executing(current_step=4, skip_step=5)
    t = created(store, held)
    state, outcome = run(store.tasks.request_pause(t.task_id, running=lambda: False))
    assert (state, outcome) == (S.Paused, PauseOutcome.paused)
    assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=held)
    assert run(store.tasks.request_pause(t.task_id, running=lambda: False)) == (
        S.Paused,
        PauseOutcome.already,
    )
    # a runner's move out of Paused is refused
    with pytest.raises(IllegalTransition):
        run(store.tasks.transition(t.task_id, p.Synthesizing(), point=None))
    assert run(store.tasks.unpause(t.task_id)) == (S.Executing, ResumeOutcome.resumed)
    assert run(store.tasks.get(t.task_id)).payload == held


@covers("tasks.request_pause", "tasks.unpause")
def test_a_pause_request_is_withdrawn_before_its_boundary(store: Store) -> None:
    t = created(store, p.Planning())
    assert run(store.tasks.request_pause(t.task_id, running=lambda: True)) == (
        S.Planning,
        PauseOutcome.requested,
    )
    assert run(store.tasks.get(t.task_id)).payload == p.Planning(pause_requested=True)
    assert run(store.tasks.unpause(t.task_id)) == (S.Planning, ResumeOutcome.withdrawn)
    assert run(store.tasks.get(t.task_id)).payload == p.Planning()
    # requested again, the next move of the runner is the boundary
    run(store.tasks.request_pause(t.task_id, running=lambda: True))
    assert run(store.tasks.transition(t.task_id, p.Executing(), point=None)) is S.Paused
    assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=p.Executing())


def _held_by(store: Store, task_id: str) -> list[tuple[str, object]]:
    kinds = frozenset(
        {BusEventKind.TaskPaused, BusEventKind.TaskResumed, BusEventKind.TaskCancelled}
    )
    return [
        (e.kind.value, e.body.get("by")) for e in run(store.events.bus_for_task(task_id, kinds))
    ]


@covers("tasks.request_pause", "tasks.unpause", "events.bus_for_task")
def test_who_paused_and_resumed_is_in_the_bus_events(store: Store) -> None:
    t = created(store, p.Executing(current_step=1))
    run(store.tasks.request_pause(t.task_id, running=lambda: False, by="console (session ab)"))
    run(store.tasks.unpause(t.task_id, by="cli (uid 1000, pid 7)"))
    assert _held_by(store, t.task_id) == [
        ("TaskPaused", "console (session ab)"),
        ("TaskResumed", "cli (uid 1000, pid 7)"),
    ]
    # a running task's pause is reached at its boundary: the event is still the asker's
    run(store.tasks.request_pause(t.task_id, running=lambda: True, by="telegram (42)"))
    done = b.step(t.task_id, 1, StepStatus.completed, 1)
    run(store.tasks.step_started(b.step(t.task_id, 1)))
    assert run(store.tasks.step_finished(done, next_step=2)) is S.Paused
    assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=p.Executing(current_step=2))
    assert _held_by(store, t.task_id)[-1] == ("TaskPaused", "telegram (42)")
    # a request withdrawn takes its asker with it
    u = created(store, p.Planning())
    run(store.tasks.request_pause(u.task_id, running=lambda: True, by="slack (U1)"))
    run(store.tasks.unpause(u.task_id, by="slack (U1)"))
    assert run(store.tasks.get(u.task_id)).payload == p.Planning()
    run(store.tasks.request_pause(u.task_id, running=lambda: True))
    assert run(store.tasks.transition(u.task_id, p.Executing(), point=None)) is S.Paused
    assert _held_by(store, u.task_id) == [("TaskPaused", None)]


@covers("tasks.begin_cancel", "tasks.finish_cancel", "events.bus_for_task")
def test_who_cancelled_is_kept_with_the_intent_and_told_in_the_event(store: Store) -> None:
    t = created(store, p.Executing(current_step=2))
    run(store.tasks.begin_cancel(t.task_id, by="console (session cd)"))
    assert run(store.tasks.get(t.task_id)).payload == p.Cancelling(
        cancelled_from=S.Executing, step=2, by="console (session cd)"
    )
    run(store.tasks.finish_cancel(t.task_id, b.message(f"cancelled:{t.task_id}")))
    assert _held_by(store, t.task_id) == [("TaskCancelled", "console (session cd)")]


@covers("tasks.request_pause", "tasks.unpause")
def test_pause_and_unpause_refuse_what_they_cannot_hold(store: Store) -> None:
    for payload in (b.task(S.AwaitingApproval).payload, p.Completed()):
        t = created(store, payload)
        with pytest.raises(TaskStateRefused):
            run(store.tasks.request_pause(t.task_id, running=lambda: False))
        with pytest.raises(TaskStateRefused):
            run(store.tasks.unpause(t.task_id))
        assert run(store.tasks.get(t.task_id)) == t


@covers("tasks.begin_cancel")
def test_begin_cancel_withdraws_the_questions_and_holds_the_task(store: Store) -> None:
    t, a = parked(store)
    intent = run(store.tasks.begin_cancel(t.task_id))
    assert (intent.from_state, intent.approvals, intent.already) == (
        S.AwaitingApproval,
        [a.approval_id],
        False,
    )
    assert run(store.tasks.get(t.task_id)).payload == p.Cancelling(
        cancelled_from=S.AwaitingApproval, step=1
    )
    assert run(store.questions.approval(a.approval_id)).status is ApprovalStatus.withdrawn
    with pytest.raises(AlreadyDecided, match="withdrawn"):
        run(
            store.questions.decide_approval(
                a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
            )
        )
    for late in (p.Executing(current_step=1), p.Synthesizing(), p.Failed()):
        with pytest.raises(IllegalTransition):
            run(store.tasks.transition(t.task_id, late, point=None))
    again = run(store.tasks.begin_cancel(t.task_id))
    assert (again.from_state, again.already) == (S.AwaitingApproval, True)


@covers("tasks.begin_cancel", "tasks.finish_cancel")
def test_finish_cancel_cuts_off_running_steps_once(store: Store) -> None:
    t = created(store, p.Executing(current_step=3))
    run(store.tasks.step_started(b.step(t.task_id, 3)))
    run(store.tasks.begin_cancel(t.task_id))
    with pytest.raises(IllegalTransition):
        run(store.tasks.step_started(b.step(t.task_id, 4)))
    msg = b.message(f"cancelled:{t.task_id}", task_id=t.task_id)
    assert run(store.tasks.finish_cancel(t.task_id, msg)) == [3]
    task = run(store.tasks.get(t.task_id))
    assert (task.state, task.error) == (S.Cancelled, CANCELLED_ERROR)
    (row,) = run(store.tasks.steps(t.task_id))
    assert row.status is StepStatus.cancelled and row.completed_at is not None
    assert run(store.tasks.steps_in_flight()) == {}
    assert run(store.tasks.finish_cancel(t.task_id, b.message("second"))) is None
    assert run(store.events.pending()) == [msg]
    with pytest.raises(TaskStateRefused):
        run(store.tasks.begin_cancel(t.task_id))


@covers("tasks.finish_cancel")
def test_finish_cancel_needs_the_intent(store: Store) -> None:
    t = created(store, p.Executing())
    with pytest.raises(IllegalTransition):
        run(store.tasks.finish_cancel(t.task_id, b.message("x")))
    assert run(store.tasks.get(t.task_id)) == t
    assert run(store.events.pending()) == []


@covers("tasks.fail")
def test_fail_ends_a_task_with_its_error(store: Store) -> None:
    t = created(store, p.Synthesizing())
    run(store.tasks.fail(t.task_id, "model gone", [b.message("f", task_id=t.task_id)]))
    task = run(store.tasks.get(t.task_id))
    assert (task.state, task.error) == (S.Failed, "model gone")
    assert [m.message_key.text for m in run(store.events.pending())] == ["f"]


@covers("tasks.fail", "tasks.retry", "events.bus_for_task")
def test_a_recoverable_failure_is_retried_once_back_where_it_failed(store: Store) -> None:
    t = created(
        store, p.Executing(current_step=3, llm_request=p.LlmRequest(phase="loop", sent_at="x"))
    )
    run(
        store.tasks.fail(
            t.task_id, "model gone", [b.message("failed", task_id=t.task_id)], recoverable=True
        )
    )
    failed = run(store.tasks.get(t.task_id))
    assert failed.payload == p.Failed(recoverable=True, then=p.Executing(current_step=3))
    # back exactly where it was, and nothing of that moment's own (the request sent)
    assert run(store.tasks.retry(t.task_id, by="cli (uid 1)")) is S.Executing
    again = run(store.tasks.get(t.task_id))
    assert (again.payload, again.error) == (p.Executing(current_step=3), None)
    (retried,) = run(store.events.bus_for_task(t.task_id, frozenset({BusEventKind.TaskRetried})))
    assert retried.body == {
        "state": "Executing",
        "from": "Failed",
        "by": "cli (uid 1)",
        "error": "model gone",
        "retry": 1,
    }
    # a second retry finds it working: refused, nothing changed
    with pytest.raises(TaskStateRefused, match="Executing: it has not failed"):
        run(store.tasks.retry(t.task_id))
    assert run(store.tasks.get(t.task_id)) == again
    # its next failure counts the retry, and is a message of its own
    _fails_again_after_one_retry(store, t.task_id, step=3)


@covers("tasks.fail", "tasks.retry", "tasks.cleanup", "events.bus_for_task")
def test_a_kept_tasks_retries_outlive_the_event_retention(store: Store) -> None:
    # the retry count, and the key of each failure's notice, are read from the task's
    # TaskRetried events: pruning them would count again from 0 and reuse a sent key
    t = created(store, p.Executing(current_step=2))
    run(store.tasks.fail(t.task_id, "model gone", recoverable=True))
    run(store.tasks.retry(t.task_id, by="cli (uid 1)"))
    later = rfc3339(datetime.now(UTC) + timedelta(days=1))
    while run(store.tasks.cleanup(later, later)) > 0:
        pass
    kept = run(store.events.bus_for_task(t.task_id, frozenset(BusEventKind)))
    assert [e.kind for e in kept] == [BusEventKind.TaskRetried]  # the rest went
    _fails_again_after_one_retry(store, t.task_id, step=2)


def _fails_again_after_one_retry(store: Store, task_id: str, *, step: int) -> None:
    """The task fails again: its retry is counted, and its notice has a key of its own."""
    notice = b.message(f"failed:{task_id}", task_id=task_id)
    run(store.tasks.fail(task_id, "gone again", [notice], recoverable=True))
    assert run(store.tasks.get(task_id)).payload == p.Failed(
        recoverable=True, retry_count=1, then=p.Executing(current_step=step)
    )
    assert f"failed:{task_id}:1" in [m.message_key.text for m in run(store.events.pending())]


@covers("tasks.fail", "tasks.retry")
def test_an_unrecoverable_failure_or_a_task_that_did_not_fail_is_not_retried(
    store: Store,
) -> None:
    t = created(store, p.Executing(current_step=1))
    with pytest.raises(TaskStateRefused, match="it has not failed"):
        run(store.tasks.retry(t.task_id))
    run(store.tasks.fail(t.task_id, "denied by the owner"))
    failed = run(store.tasks.get(t.task_id))
    assert failed.payload == p.Failed()
    with pytest.raises(TaskStateRefused, match="not recoverable: denied by the owner"):
        run(store.tasks.retry(t.task_id))
    assert run(store.tasks.get(t.task_id)) == failed
    # a runner's move out of Failed is refused: only the owner's retry leaves it
    with pytest.raises(IllegalTransition):
        run(store.tasks.transition(t.task_id, p.Executing(current_step=1), point=None))


# -- recovery ------------------------------------------------------------------------


@covers("tasks.apply_recovery")
def test_apply_recovery_is_one_commit(store: Store) -> None:
    gone = created(store, p.Executing(current_step=1))
    ask = created(store, p.Executing(current_step=2))
    held = created(store, p.Planning(pause_requested=True))
    ending = created(store, p.Cancelling(cancelled_from=S.Executing, step=0))
    again = created(store, p.Extracting())
    a = b.approval(ask.task_id, step=2)
    parked = p.AwaitingApproval(approval_id=a.approval_id, step=2)
    prompt = b.message(f"approval:{a.approval_id}:1", "approval", task_id=ask.task_id)
    report = b.message("report:boot-1", "report")
    run(
        store.tasks.apply_recovery(
            abandon=[(gone.task_id, "died twice")],
            attempted=[again.task_id, again.task_id],
            messages=[report, prompt],
            park=[(a, parked)],
            pause=[held.task_id],
            cancel=[ending.task_id],
            recovered=[
                (held.task_id, "Pause", "its pause was asked for"),
                (again.task_id, "X", ""),
            ],
        )
    )
    told = frozenset({BusEventKind.TaskRecovered, BusEventKind.TaskPaused})
    assert [(e.kind, e.body) for e in run(store.events.bus_for_task(held.task_id, told))] == [
        (BusEventKind.TaskRecovered, {"action": "Pause", "reason": "its pause was asked for"}),
        (BusEventKind.TaskPaused, {"state": "Paused", "from": "Planning"}),
    ]
    (again_told,) = run(store.events.bus_for_task(again.task_id, told))
    assert again_told.body == {"action": "X", "reason": ""}
    g = run(store.tasks.get(gone.task_id))
    assert (g.state, g.error) == (S.Abandoned, "died twice")
    assert run(store.tasks.get(ask.task_id)).payload == parked
    assert run(store.questions.approval(a.approval_id)).prompts_sent == 1
    assert run(store.tasks.get(held.task_id)).payload == p.Paused(then=p.Planning())
    assert run(store.tasks.get(ending.task_id)).state is S.Cancelled
    assert run(store.tasks.get(again.task_id)).recovery_attempts == 2
    assert run(store.events.pending()) == [report, prompt]


@covers("tasks.apply_recovery")
def test_apply_recovery_refused_in_part_writes_nothing(store: Store) -> None:
    gone = created(store, p.Executing())
    done = created(store, p.Completed())
    again = created(store)
    with pytest.raises(IllegalTransition):
        run(
            store.tasks.apply_recovery(
                abandon=[(gone.task_id, "x"), (done.task_id, "y")],
                attempted=[again.task_id],
                messages=[b.message("report")],
            )
        )
    for t in (gone, done, again):
        assert run(store.tasks.get(t.task_id)) == t
    assert run(store.events.pending()) == []
