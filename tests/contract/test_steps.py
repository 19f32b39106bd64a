"""A task's steps, hook verdicts, learnings and model calls: each written in the commit
that moves the task, only while it executes, and pruned with it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pfar.errors import (
    IllegalTransition,
    UnknownTask,
)
from pfar.journal import (
    StepStatus,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.bus_sql import BusEventKind
from pfar.journal.holds import PauseOutcome
from pfar.journal.records import rfc3339
from pfar.journal.store import Store

from . import builders as b
from .helpers import created, llm_call, run, settle
from .verbs import covers

S = TaskState


# -- steps ------------------------------------------------------------------------


@covers("tasks.step_started", "tasks.step_finished", "tasks.steps", "tasks.steps_in_flight")
def test_a_step_row_is_written_only_while_executing(store: Store) -> None:
    for payload in (p.Planning(), p.Paused(then=p.Executing()), p.Completed()):
        t = created(store, payload)
        with pytest.raises(IllegalTransition):
            run(store.tasks.step_started(b.step(t.task_id, 0)))
        with pytest.raises(IllegalTransition):
            run(store.tasks.step_finished(b.step(t.task_id, 0, StepStatus.completed), next_step=1))
        assert run(store.tasks.steps(t.task_id)) == []
        assert run(store.tasks.get(t.task_id)) == t
    assert run(store.tasks.steps_in_flight()) == {}


@covers(
    "tasks.step_started",
    "tasks.steps",
    "tasks.step",
    "tasks.steps_in_flight",
    "tasks.step_process",
    "tasks.started_processes",
)
def test_step_started_is_durable_and_overwritten_by_a_rerun(store: Store) -> None:
    t = created(store, p.Executing())
    first = b.step(t.task_id, 0)
    run(store.tasks.step_started(first))
    assert run(store.tasks.steps(t.task_id)) == [first]
    assert run(store.tasks.step(t.task_id, 0)) == first
    assert run(store.tasks.steps_in_flight()) == {t.task_id: first}
    rerun = replace(first, args={"url": "http://y"})
    run(store.tasks.step_started(rerun))
    assert run(store.tasks.steps(t.task_id)) == [rerun]
    # a running step's process, so that a restart can end it
    run(store.tasks.step_process(t.task_id, 0, {"pid": 4242, "start_time": 1717}))
    assert run(store.tasks.started_processes(t.task_id)) == [
        (t.task_id, 0, {"pid": 4242, "start_time": 1717})
    ]


@covers("tasks.step_started")
def test_step_started_spends_the_answers_of_a_run(store: Store) -> None:
    answers: dict[str, Any] = {
        "retry_step": 1,
        "approved": p.Grant(step=1, args_sha256="c" * 64),
        "workflow_answer": p.WorkflowAnswer(option="rerun", question="q", step=1, approval_id="ap"),
    }
    assert set(p.SPENT_BY_A_RUN) <= set(answers), "give the contract the new answer field"
    answered = p.Executing(current_step=1, skip_step=2, **answers)
    t = created(store, answered)
    run(store.tasks.step_started(b.step(t.task_id, 1)))
    after = run(store.tasks.get(t.task_id))
    spent: dict[str, Any] = dict.fromkeys(p.SPENT_BY_A_RUN)
    assert after.payload == replace(answered, **spent)
    assert after.state is S.Executing and after.current_step == 1


@covers("tasks.step_finished", "tasks.step_results")
def test_step_finished_records_its_result_and_the_progress(store: Store) -> None:
    t = created(store, p.Executing())
    started = b.step(t.task_id, 0)
    run(store.tasks.step_started(started))
    outcome = b.step(t.task_id, 0, StepStatus.completed, {"status": 200, "body": "ünï"})
    assert run(store.tasks.step_finished(replace(outcome, args={}), next_step=1)) is S.Executing
    # the outcome is added to the started row: its start (time, arguments) stays
    done = replace(outcome, started_at=started.started_at, args=started.args)
    # a read's outcome needs no start
    read = b.step(t.task_id, 1, StepStatus.skipped, ["a", 1])
    assert run(store.tasks.step_finished(read, next_step=2)) is S.Executing
    assert run(store.tasks.steps(t.task_id)) == [done, read]
    assert run(store.tasks.step_results(t.task_id)) == [
        {"status": 200, "body": "ünï"},
        ["a", 1],
    ]
    assert run(store.tasks.steps_in_flight()) == {}
    task = run(store.tasks.get(t.task_id))
    assert task.payload == p.Executing(current_step=2)
    assert task.execute_progress is not None
    assert task.execute_progress["current_step"] == 2
    assert task.execute_progress["last_completed"] == 1
    last = b.step(t.task_id, 2, StepStatus.completed, None)
    assert run(store.tasks.step_finished(last, next_step=3, last=True)) is S.Synthesizing
    assert run(store.tasks.get(t.task_id)).state is S.Synthesizing
    assert len(run(store.tasks.steps(t.task_id))) == 3


@covers("tasks.step_finished", "tasks.request_pause")
def test_step_finished_is_where_a_requested_pause_lands(store: Store) -> None:
    t = created(store, p.Executing())
    state, outcome = run(store.tasks.request_pause(t.task_id, running=lambda: True))
    assert (state, outcome) == (S.Executing, PauseOutcome.requested)
    done = b.step(t.task_id, 0, StepStatus.completed, 1)
    assert run(store.tasks.step_finished(done, next_step=1)) is S.Paused
    assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=p.Executing(current_step=1))
    assert run(store.tasks.steps(t.task_id)) == [done]


@covers("tasks.step_failed")
def test_step_failed_fails_the_task_in_one_commit(store: Store) -> None:
    t = created(store, p.Executing())
    msg = b.message(f"failed:{t.task_id}", task_id=t.task_id)
    started = b.step(t.task_id, 0)
    run(store.tasks.step_started(started))
    failed = replace(b.step(t.task_id, 0, StepStatus.failed), started_at=started.started_at)
    run(store.tasks.step_failed(failed, "step 1 of 3: boom", [msg]))
    task = run(store.tasks.get(t.task_id))
    assert (task.state, task.error) == (S.Failed, "step 1 of 3: boom")
    assert run(store.tasks.steps(t.task_id)) == [failed]
    assert run(store.events.pending()) == [msg]


@covers("tasks.step_failed")
def test_step_failed_on_an_ended_task_writes_nothing(store: Store) -> None:
    t = created(store, p.Completed())
    msg = b.message("late")
    with pytest.raises(IllegalTransition):
        run(store.tasks.step_failed(b.step(t.task_id, 0, StepStatus.failed), "late", [msg]))
    assert run(store.tasks.steps(t.task_id)) == []
    assert run(store.tasks.get(t.task_id)) == t
    assert run(store.events.pending()) == []


@pytest.mark.parametrize(
    "payload",
    [
        p.Paused(then=p.Executing()),
        p.Cancelling(cancelled_from=S.Executing),
        p.Planning(),
        p.AwaitingApproval(approval_id="ap", step=0),
    ],
    ids=lambda v: v.kind,
)
@covers("tasks.step_failed")
def test_step_failed_writes_a_row_only_while_executing(store: Store, payload: p.Payload) -> None:
    t = created(store, payload)
    with pytest.raises(IllegalTransition):
        run(store.tasks.step_failed(b.step(t.task_id, 0, StepStatus.failed), "late"))
    assert run(store.tasks.steps(t.task_id)) == []
    assert run(store.tasks.get(t.task_id)) == t


@covers("tasks.hook_verdict", "tasks.record_hook_verdict")
def test_a_hook_verdict_is_kept_once_with_its_task(store: Store) -> None:
    t = created(store)
    assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:0")) is None
    first = {"blocked": None, "changes": {"input": {"command": "ls"}}}
    kept = run(store.tasks.record_hook_verdict(t.task_id, "PreToolUse:step:0", first))
    assert kept == first
    # a second firing about the same step never replaces the first verdict
    second = {"blocked": "no", "changes": {}}
    assert run(store.tasks.record_hook_verdict(t.task_id, "PreToolUse:step:0", second)) == first
    assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:0")) == first
    assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:1")) is None


@covers("tasks.llm_request_sent", "tasks.record_llm_call", "tasks.llm_usage")
def test_a_model_call_is_journaled_before_it_goes_out(store: Store) -> None:
    t = created(store, p.Planning())
    run(store.tasks.llm_request_sent(t.task_id, "plan"))
    payload = run(store.tasks.get(t.task_id)).payload
    assert isinstance(payload, p.Planning) and payload.llm_request is not None
    assert payload.llm_request.phase == "plan"
    call = {
        "task_id": t.task_id,
        "provider": "scripted",
        "model": "m",
        "input_tokens": 10,
        "output_tokens": 5,
        "time_to_first_token": 0.1,
        "total_time": 0.2,
        "cost_usd": 0.5,
        "queued_seconds": 0.0,
    }
    store.tasks.record_llm_call(call)  # rides on the next commit
    settle(store)
    assert run(store.tasks.llm_usage(t.task_id)) == {
        "calls": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": 0.5,
    }


@covers("tasks.record_llm_call", "tasks.llm_calls")
def test_a_tasks_model_calls_are_read_in_the_order_made(store: Store) -> None:
    t, other = created(store), created(store)
    for tokens in (10, 20):
        store.tasks.record_llm_call(llm_call(t.task_id, input_tokens=tokens, cost_usd=0.25))
        settle(store)
    store.tasks.record_llm_call(llm_call(other.task_id))
    settle(store)
    calls = run(store.tasks.llm_calls(t.task_id))
    assert [c["input_tokens"] for c in calls] == [10, 20]
    assert calls[0]["at"] <= calls[1]["at"]
    assert {**calls[0], "at": ""} == {
        "at": "",
        "provider": "scripted",
        "model": "m",
        "input_tokens": 10,
        "output_tokens": 1,
        "cost_usd": 0.25,
        "priced": True,
    }
    assert run(store.tasks.llm_calls("no-such-task")) == []


# -- retention: history is pruned in bounded batches -------------------------------


@covers("tasks.cleanup", "tasks.record_llm_call", "tasks.fail")
def test_cleanup_takes_a_tasks_model_calls_with_it_in_batches(store: Store) -> None:
    finished = [created(store) for _ in range(3)]
    for t in finished:
        run(store.tasks.fail(t.task_id, "done with"))
        store.tasks.record_llm_call(llm_call(t.task_id))
    store.tasks.record_llm_call(llm_call("a-task-deleted-long-ago"))
    live = created(store)
    store.tasks.record_llm_call(llm_call(live.task_id))
    later = rfc3339(datetime.now(UTC) + timedelta(days=1))
    first = run(store.tasks.cleanup(later, later, batch=2))
    assert first >= 2  # a full batch: the caller calls again
    while run(store.tasks.cleanup(later, later, batch=2)) >= 2:
        pass
    assert run(store.tasks.cleanup(later, later, batch=2)) == 0
    for t in finished:
        with pytest.raises(UnknownTask):
            run(store.tasks.get(t.task_id))
        assert run(store.tasks.llm_usage(t.task_id))["calls"] == 0
    assert run(store.tasks.llm_usage("a-task-deleted-long-ago"))["calls"] == 0
    assert run(store.tasks.llm_usage(live.task_id))["calls"] == 1  # a live task keeps its


@covers("tasks.learnings_decided")
def test_the_first_learnings_decided_are_the_ones_kept(store: Store) -> None:
    t = created(store, p.Completed())
    first = [{"content": "use uv", "tags": ["python"]}]
    assert run(store.tasks.learnings_decided(t.task_id, first)) == first
    # decided again after a restart: what was decided first stands
    other = [{"content": "other", "tags": []}]
    assert run(store.tasks.learnings_decided(t.task_id, other)) == first
    assert run(store.tasks.learnings_decided(created(store).task_id, [])) == []


@covers("tasks.learnings_kept")
def test_learnings_are_marked_kept_once_with_their_events(store: Store) -> None:
    t = created(store, p.Completed())
    kinds = frozenset({BusEventKind.LearningExtracted})
    events = [{"text": "use uv"}, {"text": "ünï"}]
    assert run(store.tasks.learnings_kept(t.task_id, events)) is True
    published = run(store.events.bus_for_task(t.task_id, kinds))
    assert [e.body for e in published] == events
    # marked before: nothing is published again
    assert run(store.tasks.learnings_kept(t.task_id, events)) is False
    assert run(store.events.bus_for_task(t.task_id, kinds)) == published
