"""The owner's question about a task in flight during kernel deaths, its answers, and the
report's line for it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pfar.answers import Abandon, Resume, Retry
from pfar.errors import PfarError
from pfar.journal import ApprovalRecord, ApprovalStatus, Move, TaskRecord, TaskState
from pfar.journal.payloads import (
    AwaitingApproval,
    Executing,
    Extracting,
    Grant,
    InFlight,
    LlmRequest,
    Payload,
    Planning,
    Synthesizing,
    Working,
    state_of,
)
from pfar.journal.question_kinds import QuestionKind
from pfar.journal.states import is_legal
from pfar.recovery import RecoveryReport
from pfar.recovery.in_flight import in_flight_answer, in_flight_question
from tests.support import payload_for

RUNNING = [TaskState.Extracting, TaskState.Planning, TaskState.Executing, TaskState.Synthesizing]


def _task(state: TaskState, payload: Payload | None = None, step: int = 1) -> TaskRecord:
    return TaskRecord(
        task_id="0123456789abcdef",
        template_id="t",
        principal="owner",
        trigger_event={"text": "x"},
        state=state,
        payload=payload or payload_for(state, step),
        phase=state.phase,
        plan={"steps": [{}, {}, {}]},
        execute_progress=None,
        extracted_metadata=None,
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id=None,
        created_at="2030-01-01T00:00:00.000000Z",
        updated_at="2030-01-01T00:00:00.000000Z",
        error=None,
        event_id=None,
        template_hash="",
        recovery_attempts=2,
    )


def _parked(task: TaskRecord, deaths: int = 3) -> tuple[TaskRecord, ApprovalRecord]:
    """`task` as recovery parks it: its question, and the row as the park commits it."""
    question, parked = in_flight_question(task, deaths, "Nightly backup", 3600)
    row = replace(task, state=TaskState.AwaitingApproval, payload=parked, recovery_attempts=0)
    return row, question


_requests = st.none() | st.builds(
    LlmRequest,
    phase=st.sampled_from(["extract", "plan"]),
    sent_at=st.just("2030-01-01T00:00:00.000000Z"),
)
_steps = st.integers(min_value=0, max_value=2)
working_payloads = st.one_of(
    st.builds(
        Executing,
        current_step=_steps,
        retry_step=st.none() | _steps,
        skip_step=st.none() | _steps,
        approved=st.none() | st.builds(Grant, step=_steps, args_sha256=st.none() | st.just("ab")),
        llm_request=_requests,
    ),
    *(st.builds(cls, llm_request=_requests) for cls in (Extracting, Planning, Synthesizing)),
)


@given(working_payloads, st.integers(min_value=1, max_value=50))
def test_resume_puts_the_task_back_exactly_where_it_was(payload: Working, deaths: int) -> None:
    state = state_of(payload)
    task = _task(state, payload)
    row, question = _parked(task, deaths)
    assert in_flight_answer(row, question, Resume()) == Move(task.payload)
    assert is_legal(TaskState.AwaitingApproval, state)
    assert is_legal(state, TaskState.AwaitingApproval)  # it could be parked from there


@given(st.sampled_from(RUNNING), st.integers(min_value=1, max_value=50))
def test_abandon_says_it_was_the_owners_choice_and_what_was_known(
    state: TaskState, deaths: int
) -> None:
    row, question = _parked(_task(state), deaths)
    move = in_flight_answer(row, question, Abandon())
    assert state_of(move.to) is TaskState.Abandoned
    assert is_legal(TaskState.AwaitingApproval, TaskState.Abandoned)
    assert move.update.error == (
        f"Abandoned by the owner: it was in flight during {deaths} kernel deaths in a row, "
        "with no progress between them"
    )


def test_the_question_states_what_is_known_and_offers_resume_first() -> None:
    task = _task(TaskState.Executing)
    question, parked = in_flight_question(task, 3, "Nightly backup", 60)
    assert question.action_type is QuestionKind.in_flight_deaths
    assert question.options == ["resume", "abandon"]  # `pfar approve` resumes
    assert question.status is ApprovalStatus.pending
    assert question.step == 1
    assert question.description == (
        "Task Nightly backup (01234567) was in flight (Executing, step 2 of 3) during 3 "
        "kernel deaths in a row, with no progress between them. pfar cannot tell whether "
        "it caused them. Resume it where it was, or abandon it?"
    )
    assert parked == AwaitingApproval(
        approval_id=question.approval_id,
        step=1,
        in_flight=InFlight(deaths=3, then=Executing(current_step=1)),
    )


def test_another_answer_or_a_row_without_its_origin_is_refused_naming_the_ids() -> None:
    row, question = _parked(_task(TaskState.Planning))
    with pytest.raises(PfarError, match="offers resume, abandon; got 'retry'"):
        in_flight_answer(row, question, Retry())
    bare = replace(row, payload=AwaitingApproval(approval_id="x"))
    with pytest.raises(PfarError, match=f"task {row.task_id}: .* approval .* no state to resume"):
        in_flight_answer(bare, question, Resume())


def test_the_report_line_says_what_is_known_per_count_of_deaths() -> None:
    report = RecoveryReport()
    report.parked = {"a": 3, "b": 3, "c": 5}
    report.descriptions = {"a": "Nightly backup", "b": "Sync mail", "c": "Crawl"}
    assert not report.empty
    assert report.render() == (
        "System restarted. Recovery report:\n"
        " - 2 tasks parked: in flight during 3 kernel deaths in a row with no progress; "
        "the owner is asked to resume or abandon (Nightly backup, Sync mail)\n"
        " - 1 task parked: in flight during 5 kernel deaths in a row with no progress; "
        "the owner is asked to resume or abandon (Crawl)"
    )
    assert report.to_json()["parked"] == ["a", "b", "c"]
