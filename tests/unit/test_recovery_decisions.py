"""Property tests of the recovery decisions (persistence spec §7.2, §7.3)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pfar.journal import (
    Idempotency,
    Semantics,
    StepRecord,
    StepStatus,
    TaskKind,
    TaskRecord,
    TaskState,
)
from pfar.journal.payloads import Executing, Working
from pfar.journal.records import rfc3339
from pfar.recovery import (
    InFlightDeaths,
    RecoveryAction,
    StepRecovery,
    TooOld,
    WriteCutOff,
    WriteInDoubt,
    decide,
    determine_recovery_action,
    should_retry_step,
)
from tests.support import payload_for

NOW = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

EXPECTED = {
    TaskState.Extracting: RecoveryAction.RetryFromScratch,
    TaskState.Planning: RecoveryAction.RetryFromScratch,
    TaskState.Synthesizing: RecoveryAction.Resynthesize,
    TaskState.AwaitingApproval: RecoveryAction.RepromptApproval,
    TaskState.AwaitingCredential: RecoveryAction.RepromptCredential,
    TaskState.Completed: RecoveryAction.Abandon,
    TaskState.Failed: RecoveryAction.Abandon,
    TaskState.Abandoned: RecoveryAction.Abandon,
    TaskState.Cancelled: RecoveryAction.Abandon,
    TaskState.Paused: RecoveryAction.LeavePaused,
    TaskState.Cancelling: RecoveryAction.FinishCancel,
    TaskState.WaitingForUser: RecoveryAction.AwaitInput,
    TaskState.Blocked: RecoveryAction.AwaitSubtask,
    TaskState.Queued: RecoveryAction.Requeue,
}

ages_us = st.integers(min_value=-5_000_000, max_value=30 * 24 * 3600 * 1_000_000)


def _task(
    state: TaskState,
    *,
    current_step: int = 0,
    age_us: int = 0,
    attempts: int = 0,
    task_id: str = "task-1",
) -> TaskRecord:
    updated = rfc3339(NOW - timedelta(microseconds=age_us))
    return TaskRecord(
        task_id=task_id,
        template_id="t",
        principal="owner",
        trigger_event={"text": "x"},
        state=state,
        payload=payload_for(state, current_step),
        phase=state.phase,
        plan={"steps": []},
        execute_progress=None,
        extracted_metadata=None,
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id=None,
        created_at=updated,
        updated_at=updated,
        error=None,
        event_id=None,
        template_hash="",
        recovery_attempts=attempts,
    )


@st.composite
def tasks(draw: st.DrawFn) -> TaskRecord:
    return _task(
        draw(st.sampled_from(list(TaskState))),
        current_step=draw(st.integers(min_value=0, max_value=50)),
        age_us=draw(ages_us),
        attempts=draw(st.integers(min_value=0, max_value=10)),
        task_id=draw(st.uuids()).hex,
    )


max_ages = st.integers(min_value=1, max_value=7 * 24 * 3600).map(lambda s: timedelta(seconds=s))
max_attempts = st.integers(min_value=1, max_value=6)


# -- determine_recovery_action -------------------------------------------------------


@given(tasks())
def test_action_follows_the_state(task: TaskRecord) -> None:
    action = determine_recovery_action(task)
    if task.state is TaskState.Executing:
        expected = (
            RecoveryAction.ResumeExecution
            if task.current_step > 0
            else RecoveryAction.RetryFromScratch
        )
    else:
        expected = EXPECTED[task.state]
    assert action is expected


def test_executing_at_step_zero_retries_and_later_resumes() -> None:
    assert determine_recovery_action(_task(TaskState.Executing)) is RecoveryAction.RetryFromScratch
    assert (
        determine_recovery_action(_task(TaskState.Executing, current_step=1))
        is RecoveryAction.ResumeExecution
    )


# -- decide: age and crash loops first ------------------------------------------------


@given(tasks(), max_ages, max_attempts, st.booleans())
def test_decide(task: TaskRecord, max_age: timedelta, attempts: int, crashed: bool) -> None:
    d = decide(task, NOW, max_age, attempts, crashed)
    assert d.task_id == task.task_id
    age = NOW - datetime.fromisoformat(task.updated_at.replace("Z", "+00:00"))
    if task.state.parked or task.state.held or task.state is TaskState.Queued:
        # parked tasks wait on the owner under their own deadline, and what the owner holds
        # (paused, being cancelled) is the owner's: never aged out, never abandoned for
        # crash loops (they run no code on recovery); a queued task waited for pfar's own
        # slot, which makes it no older
        assert d.action is determine_recovery_action(task)
        assert d.action is not RecoveryAction.Abandon
    elif age > max_age:
        assert d.action is RecoveryAction.Abandon
        assert "exceeded max recovery age" in d.reason
        assert f"({int(age.total_seconds() // 60)} min old)" in d.reason
    elif crashed and not task.state.terminal and task.recovery_attempts + 1 >= attempts:
        # the death that brought this restart, and one per recovered run since
        deaths = task.recovery_attempts + 1
        assert d.action is RecoveryAction.ParkInFlight
        assert d.why == InFlightDeaths(deaths)
        assert f"in flight during {deaths} kernel deaths in a row" in d.reason
    else:
        assert d.action is determine_recovery_action(task)
        assert d.reason == ""


@given(
    st.sampled_from(
        [s for s in TaskState if not s.parked and not s.held and s is not TaskState.Queued]
    ),
    st.integers(min_value=1, max_value=10**9),
    st.integers(min_value=1, max_value=3600),
)
def test_non_parked_tasks_older_than_max_age_are_abandoned(
    state: TaskState, extra_us: int, max_age_s: int
) -> None:
    max_age = timedelta(seconds=max_age_s)
    age_us = max_age_s * 1_000_000 + extra_us
    d = decide(_task(state, age_us=age_us, current_step=2), NOW, max_age, 3, False)
    assert d.action is RecoveryAction.Abandon


@given(st.sampled_from(list(TaskState)), st.integers(min_value=1, max_value=3600))
def test_age_exactly_max_is_not_too_old(state: TaskState, max_age_s: int) -> None:
    assume(not state.terminal)
    task = _task(state, age_us=max_age_s * 1_000_000, current_step=1)
    d = decide(task, NOW, timedelta(seconds=max_age_s), 3, False)
    assert d.action is determine_recovery_action(task)


@given(
    st.sampled_from([TaskState.AwaitingApproval, TaskState.AwaitingCredential]),
    ages_us,
    st.integers(min_value=0, max_value=100),
    st.booleans(),
)
def test_parked_tasks_are_never_aged_out(
    state: TaskState, age_us: int, attempts: int, crashed: bool
) -> None:
    task = _task(state, age_us=age_us, attempts=attempts)
    d = decide(task, NOW, timedelta(seconds=1), 1, crashed)
    assert d.action is EXPECTED[state]


@given(
    st.sampled_from([s for s in TaskState if s.working]),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=50),
)
def test_deaths_in_flight_park_the_task_only_after_a_crash(
    state: TaskState, max_attempts_: int, attempts: int, step: int
) -> None:
    task = _task(state, age_us=1_000_000, attempts=attempts, current_step=step)
    crashed = decide(task, NOW, timedelta(minutes=10), max_attempts_, crashed=True)
    clean = decide(task, NOW, timedelta(minutes=10), max_attempts_, crashed=False)
    # after a clean shutdown the attempt counter says nothing about kernel deaths
    assert clean.action is determine_recovery_action(task)
    # never abandoned for having been in flight: being there says nothing about why
    assert crashed.action is not RecoveryAction.Abandon
    if attempts + 1 >= max_attempts_:
        assert crashed.action is RecoveryAction.ParkInFlight
        assert crashed.why == InFlightDeaths(attempts + 1)
        assert crashed.reason == (
            f"in flight during {attempts + 1} kernel deaths in a row, no progress between "
            "them: the owner will be asked to resume or abandon it"
        )
    else:
        assert crashed.action is determine_recovery_action(task)


@given(
    st.sampled_from([s for s in TaskState if s.working]),
    ages_us,
    st.integers(min_value=0, max_value=10),
    st.booleans(),
)
def test_a_standing_pause_request_pauses_whatever_the_age_or_crashes(
    state: TaskState, age_us: int, attempts: int, crashed: bool
) -> None:
    """The owner asked a running task to pause and the kernel died before its boundary:
    the restart pauses it (the owner's word), never resumes or abandons it."""
    task = _task(state, age_us=age_us, attempts=attempts)
    assert isinstance(task.payload, Working)
    task = replace(task, payload=replace(task.payload, pause_requested=True))
    d = decide(task, NOW, timedelta(seconds=1), 1, crashed)
    assert d.action is RecoveryAction.Pause


# -- should_retry_step (spec §7.3) --------------------------------------------------


def _step(status: StepStatus, semantics: Semantics, idem: Idempotency) -> StepRecord:
    return StepRecord(
        task_id="task-1",
        step=1,
        tool="x.tool",
        semantics=semantics,
        idempotency=idem,
        status=status,
        args={},
        result={"ok": True} if status is StepStatus.completed else None,
        label="Extracted",
        started_at=rfc3339(NOW),
        completed_at=rfc3339(NOW) if status is not StepStatus.started else None,
        error=None,
    )


semantics_ = st.sampled_from(list(Semantics))
idems = st.sampled_from(list(Idempotency))
statuses = st.sampled_from(list(StepStatus))


@given(st.one_of(st.none(), statuses), semantics_, idems)
def test_should_retry_step(status: StepStatus | None, sem: Semantics, idem: Idempotency) -> None:
    rec = None if status is None else _step(status, sem, idem)
    got = should_retry_step(rec, sem, idem)
    if status in (StepStatus.completed, StepStatus.skipped):
        assert got is StepRecovery.SkipWithCachedResult
    elif sem is Semantics.Read:
        assert got is StepRecovery.Retry
    elif status is StepStatus.started:
        assert (
            got
            is {
                Idempotency.none: StepRecovery.RequireOwnerConfirmation,
                Idempotency.key: StepRecovery.Retry,
                Idempotency.check: StepRecovery.CheckEffect,
            }[idem]
        )
    else:
        assert got is StepRecovery.Execute


def test_section_7_3_table() -> None:
    done = _step(StepStatus.completed, Semantics.Write, Idempotency.none)
    assert should_retry_step(done, Semantics.Write, Idempotency.none) is (
        StepRecovery.SkipWithCachedResult
    )
    done_read = _step(StepStatus.completed, Semantics.Read, Idempotency.key)
    assert should_retry_step(done_read, Semantics.Read, Idempotency.key) is (
        StepRecovery.SkipWithCachedResult
    )
    assert should_retry_step(None, Semantics.Read, Idempotency.none) is StepRecovery.Retry
    assert should_retry_step(None, Semantics.Write, Idempotency.none) is StepRecovery.Execute
    started = _step(StepStatus.started, Semantics.Write, Idempotency.none)
    assert should_retry_step(started, Semantics.Write, Idempotency.none) is (
        StepRecovery.RequireOwnerConfirmation
    )
    keyed = _step(StepStatus.started, Semantics.Write, Idempotency.key)
    assert should_retry_step(keyed, Semantics.Write, Idempotency.key) is StepRecovery.Retry
    checked = _step(StepStatus.started, Semantics.Write, Idempotency.check)
    assert should_retry_step(checked, Semantics.Write, Idempotency.check) is (
        StepRecovery.CheckEffect
    )


# -- a write in flight: the owner is asked, and recovery says so ---------------------------


def _in_flight(idempotency: Idempotency, step: int = 0) -> StepRecord:
    return StepRecord(
        "task-1",
        step,
        "shell.run",
        Semantics.Write,
        idempotency,
        StepStatus.started,
        {},
        None,
        "Raw",
        rfc3339(NOW),
        None,
        None,
    )


def _executing(**answered: int) -> TaskRecord:
    task = _task(TaskState.Executing)
    return replace(task, plan={"steps": [{}]}, payload=Executing(current_step=0, **answered))


def test_a_write_in_doubt_is_decided_as_asking_the_owner() -> None:
    d = decide(_executing(), NOW, timedelta(hours=1), 3, True, _in_flight(Idempotency.none))
    assert d.action is RecoveryAction.AskOwner
    assert d.why == WriteInDoubt("shell.run", 0, 1)
    assert d.reason == (
        "the write in flight (shell.run, step 1 of 1) may have happened: "
        "the owner will be asked to retry, skip or fail it"
    )


@pytest.mark.parametrize(
    ("idempotency", "checked", "how"),
    [
        (Idempotency.key, False, "is sent again under the same idempotency key"),
        (Idempotency.check, True, "is checked first and run again only if it did not happen"),
    ],
)
def test_a_write_cut_off_that_is_safe_to_resume_says_how_and_that_approval_is_asked_again(
    idempotency: Idempotency, checked: bool, how: str
) -> None:
    task = _executing()
    d = decide(task, NOW, timedelta(hours=1), 3, True, _in_flight(idempotency))
    assert d.action is determine_recovery_action(task)
    assert d.why == WriteCutOff("shell.run", 0, 1, checked=checked)
    assert d.reason == (
        f"the write in flight (shell.run, step 1 of 1) {how}; "
        "if it needs the owner's approval, the owner is asked again first"
    )


@pytest.mark.parametrize(
    ("task", "step"),
    [
        (_executing(retry_step=0), _in_flight(Idempotency.none)),  # owner said retry
        (_executing(skip_step=0), _in_flight(Idempotency.none)),  # owner said skip
        (_executing(), None),  # nothing in flight
    ],
    ids=["answered-retry", "answered-skip", "none-in-flight"],
)
def test_nothing_to_say_when_the_owner_answered_or_nothing_is_in_flight(
    task: TaskRecord, step: StepRecord | None
) -> None:
    d = decide(task, NOW, timedelta(hours=1), 3, True, step)
    assert d.action is determine_recovery_action(task) and d.why is None


# -- in flight during kernel deaths: a question, never an abandonment ---------------------


@given(tasks(), max_ages, max_attempts, st.booleans())
def test_only_age_abandons_an_unfinished_task(
    task: TaskRecord, max_age: timedelta, attempts: int, crashed: bool
) -> None:
    """Of what recovery knows about an unfinished task, only its age abandons it; the
    reason is a typed record, never prose to be read back."""
    assume(not task.state.terminal)
    d = decide(task, NOW, max_age, attempts, crashed)
    if d.action is RecoveryAction.Abandon:
        assert isinstance(d.why, TooOld)
    if d.action is RecoveryAction.ParkInFlight:
        assert crashed and not task.state.parked
        assert d.why == InFlightDeaths(task.recovery_attempts + 1)


@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=10))
def test_deaths_count_the_one_that_brought_the_restart(max_deaths: int, attempts: int) -> None:
    """`recovery_attempts` counts recovered runs since the last progress, each ended by a
    death; the death that interrupted the run before them makes one more."""
    task = _task(TaskState.Planning, attempts=attempts)
    d = decide(task, NOW, timedelta(hours=1), max_deaths, crashed=True)
    assert (d.action is RecoveryAction.ParkInFlight) is (attempts + 1 >= max_deaths)


def test_a_workflow_in_flight_during_the_deaths_is_parked_too_but_never_aged_out() -> None:
    wf = replace(
        _executing(), kind=TaskKind.workflow, template_id="workflow:build", recovery_attempts=2
    )
    old = replace(wf, updated_at=rfc3339(NOW - timedelta(days=3)))
    assert decide(old, NOW, timedelta(minutes=10), 3, True).why == InFlightDeaths(3)
    assert decide(old, NOW, timedelta(minutes=10), 4, True).action is (
        RecoveryAction.RetryFromScratch
    )


def test_the_deaths_are_asked_about_before_a_write_in_doubt() -> None:
    """Past the deaths, nothing of the task runs before the owner answers, not even the
    question about its write (that one comes after a "resume")."""
    task = replace(_executing(), recovery_attempts=2)
    d = decide(task, NOW, timedelta(hours=1), 3, True, _in_flight(Idempotency.none))
    assert d.action is RecoveryAction.ParkInFlight
    assert d.why == InFlightDeaths(3)
    below = decide(task, NOW, timedelta(hours=1), 4, True, _in_flight(Idempotency.none))
    assert below.action is RecoveryAction.AskOwner
