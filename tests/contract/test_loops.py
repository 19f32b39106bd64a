"""The loop family's contract beyond the conversation: subtasks (spawned once, their
parent blocked on them and unblocked), settings, the owner's standing permission
answers, the anomalies found about tool calls, and a task's writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pfar.answers import Answer, Approve
from pfar.errors import IllegalTransition, TaskStateRefused, UnknownTask
from pfar.journal import (
    ApprovalRecord,
    InboundEvent,
    Move,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.records import rfc3339
from pfar.journal.store import Store
from pfar.journal.turns import LoopSettings, PermissionRule, UserTurn

from . import builders as b
from .helpers import created, created_loop, loop_task, parked, run
from .verbs import covers

S = TaskState


def _subtask(
    parent: TaskRecord, step: int
) -> tuple[StepRecord, TaskRecord, LoopSettings, InboundEvent]:
    """A Task call of `parent` at `step`: its row, its child, the child's settings and the
    event that makes the child once."""
    call = replace(b.step(parent.task_id, step), tool="Task", args={"prompt": "sub"})
    settings = LoopSettings(
        working_dir="/w", parent_task_id=parent.task_id, parent_step=step, depth=1
    )
    event = InboundEvent(
        event_id=f"subtask:{parent.task_id}:{step}",
        adapter="subtask",
        template_id="tpl",
        text="sub",
    )
    return call, loop_task(), settings, event


@covers("loops.spawn", "loops.children")
def test_spawn_makes_the_child_once_and_blocks_the_parent_on_it(store: Store) -> None:
    parent = created_loop(store, p.Executing(current_step=2))
    call, child, settings, event = _subtask(parent, 2)
    assert run(store.loops.spawn(call, child, settings, "look into it", event)) == child
    assert run(store.tasks.get(child.task_id)) == child
    assert run(store.loops.settings(child.task_id)) == settings
    assert [s.turn for s in run(store.loops.turns(child.task_id))] == [
        UserTurn(text="look into it", source="prompt")
    ]
    blocked = p.Blocked(step=2, child_task_id=child.task_id)
    assert run(store.tasks.payload(parent.task_id)) == blocked
    row = run(store.tasks.step(parent.task_id, 2))
    assert row is not None and row.status is StepStatus.started and row.tool == "Task"
    assert run(store.loops.children(parent.task_id)) == [child.task_id]
    # the call run again (after a crash): it finds the child it started
    run(store.tasks.transition(parent.task_id, p.Executing(current_step=2), point=None))
    again = run(store.loops.spawn(call, loop_task(), settings, "look into it", event))
    assert again == child
    assert run(store.loops.children(parent.task_id)) == [child.task_id]
    assert run(store.tasks.payload(parent.task_id)) == blocked


@covers("loops.spawn")
def test_spawn_from_a_task_that_is_not_executing_makes_no_child(store: Store) -> None:
    parent = created_loop(store, p.Paused(then=p.Executing(current_step=2)))
    call, child, settings, event = _subtask(parent, 2)
    with pytest.raises(IllegalTransition):
        run(store.loops.spawn(call, child, settings, "look into it", event))
    assert run(store.tasks.get(parent.task_id)) == parent
    assert run(store.tasks.step(parent.task_id, 2)) is None
    with pytest.raises(UnknownTask):
        run(store.tasks.get(child.task_id))
    assert run(store.loops.children(parent.task_id)) == []
    assert run(store.adapters.seen(event.event_id)) is False


@covers("loops.unblock", "loops.children")
def test_unblock_records_the_calls_outcome_and_goes_on(store: Store) -> None:
    parent = created_loop(store, p.Executing(current_step=2))
    call, child, settings, event = _subtask(parent, 2)
    run(store.loops.spawn(call, child, settings, "sub", event))
    blocked = run(store.tasks.get(parent.task_id))
    # an outcome for another call than the one it waits on
    other = replace(b.step(parent.task_id, 5, StepStatus.completed, "x"), tool="Task")
    with pytest.raises(TaskStateRefused):
        run(store.loops.unblock(other))
    assert run(store.tasks.get(parent.task_id)) == blocked
    assert run(store.tasks.step(parent.task_id, 5)) is None
    done = replace(call, status=StepStatus.completed, result="the child's answer")
    assert run(store.loops.unblock(done)) is S.Executing
    assert run(store.tasks.payload(parent.task_id)) == p.Executing(current_step=3)
    row = run(store.tasks.step(parent.task_id, 2))
    assert row is not None and (row.status, row.result) == (
        StepStatus.completed,
        "the child's answer",
    )
    # no longer blocked: a second outcome is refused
    with pytest.raises(TaskStateRefused):
        run(store.loops.unblock(done))
    with pytest.raises(UnknownTask):
        run(store.loops.unblock(replace(done, task_id="nope")))
    # a second subtask: the children are listed in id order
    call2, child2, settings2, event2 = _subtask(parent, 3)
    run(store.loops.spawn(call2, child2, settings2, "sub", event2))
    assert run(store.loops.children(parent.task_id)) == sorted([child.task_id, child2.task_id])
    assert run(store.loops.children(child.task_id)) == []


@covers("loops.update_settings")
def test_update_settings_replaces_them_with_its_messages(store: Store) -> None:
    t = created_loop(store, settings=LoopSettings(working_dir="/w", use_worktree=True))
    made = LoopSettings(
        working_dir="/w", use_worktree=True, worktree="/w/.wt/1", branch="pfar/1", git_dir=""
    )
    msg = b.message("worktree:1", task_id=t.task_id)
    run(store.loops.update_settings(t.task_id, made, [msg]))
    assert run(store.loops.settings(t.task_id)) == made
    assert run(store.events.pending()) == [msg]
    run(store.loops.update_settings(t.task_id, LoopSettings(working_dir="/v")))
    assert run(store.loops.settings(t.task_id)) == LoopSettings(working_dir="/v")


def _remembering(rule: PermissionRule) -> Callable[[TaskRecord, ApprovalRecord, Answer], Move]:
    """An answer's move that keeps `rule` as the owner's standing answer."""

    def resume_to(task: TaskRecord, a: ApprovalRecord, answer: Answer) -> Move:
        return Move(p.Executing(current_step=a.step or 0), remember=rule)

    return resume_to


@covers("loops.rules", "loops.forget_rule")
def test_a_standing_answer_is_kept_with_the_decision_and_forgotten_on_request(
    store: Store,
) -> None:
    assert run(store.loops.rules()) == []
    git = PermissionRule("shell.run", "git *", "allow", "t-1")
    rm = PermissionRule("shell.run", "rm *", "deny", None)
    web = PermissionRule("http.request", "*.example.com", "allow", None)
    for rule in (git, rm, web):
        _, a = parked(store)
        run(
            store.questions.decide_approval(
                a.approval_id, Approve(), resume_to=_remembering(rule), by="cli"
            )
        )
    # by tool, then pattern
    assert run(store.loops.rules()) == [web, git, rm]
    # a later answer about the same calls replaces the earlier one
    never = PermissionRule("shell.run", "git *", "deny", "t-2")
    _, a = parked(store)
    run(
        store.questions.decide_approval(
            a.approval_id, Approve(), resume_to=_remembering(never), by="cli"
        )
    )
    assert run(store.loops.rules()) == [web, never, rm]
    assert run(store.loops.forget_rule("shell.run", "git *")) is True
    assert run(store.loops.forget_rule("shell.run", "git *")) is False
    assert run(store.loops.forget_rule("shell.run", "nothing")) is False
    assert run(store.loops.rules()) == [web, rm]


@covers("loops.record_anomalies", "loops.anomalies", "loops.host_first_seen")
def test_anomalies_are_kept_per_call_and_a_host_is_first_seen_once(store: Store) -> None:
    t, u = created_loop(store), created_loop(store)
    assert run(store.loops.host_first_seen("example.com")) is None
    msg = b.message("anomaly:1", task_id=t.task_id)
    found = [("new_host", "example.com"), ("burst", "3 writes in 1 s")]
    run(store.loops.record_anomalies(t.task_id, 1, found, "example.com", [msg]))
    assert run(store.loops.anomalies(t.task_id, 1)) == sorted(found)
    assert run(store.loops.host_first_seen("example.com")) == (t.task_id, 1)
    assert run(store.events.pending()) == [msg]
    # looked at again (after a crash): what was found first stands; the host was seen
    run(store.loops.record_anomalies(t.task_id, 1, [("burst", "changed")], "example.com"))
    run(store.loops.record_anomalies(u.task_id, 4, [], "example.com"))
    run(store.loops.record_anomalies(u.task_id, 5, [("secret", "a key")], None))
    assert run(store.loops.anomalies(t.task_id, 1)) == sorted(found)
    assert run(store.loops.host_first_seen("example.com")) == (t.task_id, 1)
    assert run(store.loops.anomalies(u.task_id, 5)) == [("secret", "a key")]
    assert run(store.loops.anomalies(u.task_id, 4)) == []
    assert run(store.loops.anomalies(t.task_id, 2)) == []


@covers("loops.writes_since")
def test_writes_since_counts_the_tasks_writes_started_from_then(store: Store) -> None:
    t = created(store, p.Executing())
    other = created(store, p.Executing())
    hour_ago = rfc3339(datetime.now(UTC) - timedelta(hours=1))
    later = rfc3339(datetime.now(UTC) + timedelta(hours=1))
    assert run(store.loops.writes_since(t.task_id, hour_ago)) == 0
    run(store.tasks.step_started(b.step(t.task_id, 0)))
    run(store.tasks.step_finished(b.step(t.task_id, 0, StepStatus.completed), next_step=1))
    run(store.tasks.step_started(b.step(t.task_id, 1)))
    read = replace(b.step(t.task_id, 2, StepStatus.completed), semantics=Semantics.Read)
    run(store.tasks.step_finished(read, next_step=3))
    run(store.tasks.step_started(b.step(other.task_id, 0)))
    assert run(store.loops.writes_since(t.task_id, hour_ago)) == 2
    assert run(store.loops.writes_since(t.task_id, later)) == 0
