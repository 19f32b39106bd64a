"""The task family's contract: creating a task (exactly once per event), reading it back,
and moving it through the state machine, checked and refused whole."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pfar.errors import (
    AmbiguousId,
    IdPrefixTooShort,
    IllegalTransition,
    UnknownTask,
)
from pfar.journal import (
    TaskKind,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from pfar.journal import payloads as p
from pfar.journal.records import rfc3339
from pfar.journal.store import Store

from . import builders as b
from .backends import Backend
from .helpers import created, run
from .verbs import covers

S = TaskState

# every payload kind, with its optional fields filled in, and a state it is entered from
RICH_PAYLOADS: list[tuple[TaskState, p.Payload]] = [
    (S.Extracting, p.Extracting(llm_request=p.LlmRequest(phase="extract", sent_at="t0"))),
    (S.Extracting, p.Planning()),
    (
        S.Planning,
        p.Executing(
            current_step=3,
            retry_step=3,
            skip_step=4,
            approved=p.Grant(step=3, args_sha256="b" * 64),
            workflow_answer=p.WorkflowAnswer(
                option="rerun", question="failed", step=3, approval_id="ap-1"
            ),
        ),
    ),
    (S.Executing, p.Synthesizing(llm_request=p.LlmRequest(phase="synthesize", sent_at="t1"))),
    (
        S.Executing,
        p.AwaitingApproval(
            approval_id="ap-2",
            step=2,
            on_deny="skip",
            template_seen="hash",
            approved=p.Grant(step=2),
            in_flight=p.InFlight(deaths=3, then=p.Executing(current_step=2)),
        ),
    ),
    (S.Planning, p.AwaitingApproval(approval_id="ap-3", resume_to="Planning")),
    (
        S.Executing,
        p.AwaitingCredential(prompt_id="pr-1", service="svc", prompt_message_id="m", step=5),
    ),
    (
        S.Planning,
        p.Paused(then=p.Planning(llm_request=p.LlmRequest(phase="plan", sent_at="t2"))),
    ),
    (S.Executing, p.Cancelling(cancelled_from=S.Executing, step=7)),
    (S.Synthesizing, p.Completed()),
    (S.Executing, p.Failed()),
    (S.Planning, p.Abandoned()),
    (S.Cancelling, p.Cancelled()),
]


# -- create -----------------------------------------------------------------------


@covers("tasks.create", "tasks.get")
def test_create_reads_back_the_record(store: Store) -> None:
    t = b.task(event_id="ev-read", text="ünïcode ✓")
    got, made = run(store.tasks.create(t, b.event("ev-read", "ünïcode ✓")))
    assert made is True and got == t
    assert run(store.tasks.get(t.task_id)) == t


@covers("tasks.create", "tasks.listing")
def test_create_with_an_event_is_exactly_once(store: Store) -> None:
    first = b.task(event_id="ev-1")
    second = b.task(event_id="ev-1", text="a redelivery")
    got1, created1 = run(store.tasks.create(first, b.event("ev-1")))
    got2, created2 = run(store.tasks.create(second, b.event("ev-1", "a redelivery")))
    assert (created1, created2) == (True, False)
    assert got2 == got1 == first
    assert [t.task_id for t in run(store.tasks.listing())] == [first.task_id]
    with pytest.raises(UnknownTask):
        run(store.tasks.get(second.task_id))


@covers("tasks.create")
def test_concurrent_redeliveries_create_one_task(store: Store) -> None:
    async def go() -> list[tuple[TaskRecord, bool]]:
        return await asyncio.gather(
            *(store.tasks.create(b.task(event_id="ev-x"), b.event("ev-x")) for _ in range(12))
        )

    results = run(go())
    assert sum(made for _, made in results) == 1
    assert len({t.task_id for t, _ in results}) == 1
    assert len(run(store.tasks.listing())) == 1


@covers("tasks.create")
def test_create_without_an_event_creates_each_time(store: Store) -> None:
    created(store)
    created(store)
    assert len(run(store.tasks.listing())) == 2


# -- claiming ---------------------------------------------------------------------


@covers("tasks.claim_unfinished", "tasks.unfinished")
def test_a_claim_takes_every_unfinished_task_and_reads_no_finished_one(store: Store) -> None:
    open_ = [created(store, payload) for payload in (None, p.Planning(), p.Executing())]
    for payload in (p.Completed(), p.Failed(), p.Cancelled()):
        created(store, payload)
    looked, malformed = run(store.tasks.unfinished())
    claimed, claimed_malformed = run(store.tasks.claim_unfinished())
    assert malformed == claimed_malformed == []
    assert {t.task_id for t in claimed} == {t.task_id for t in open_}
    assert claimed == looked
    # this kernel holds its claim: claiming again takes the same tasks, and the
    # tasks are written as before
    assert run(store.tasks.claim_unfinished())[0] == claimed
    run(store.tasks.transition(open_[1].task_id, p.Executing(), point=None))
    assert run(store.tasks.get(open_[1].task_id)).state is S.Executing


@covers("tasks.get", "tasks.payload", "tasks.transition")
def test_an_unknown_task_is_named(store: Store) -> None:
    with pytest.raises(UnknownTask, match="'nope'"):
        run(store.tasks.get("nope"))
    with pytest.raises(UnknownTask, match="'nope'"):
        run(store.tasks.payload("nope"))
    with pytest.raises(UnknownTask, match="'nope'"):
        run(store.tasks.transition("nope", p.Planning(), point=None))


@covers("tasks.payload")
def test_payload_reads_the_state_payload_alone(store: Store) -> None:
    t = created(store, p.Executing(current_step=3, pause_requested=True))
    assert run(store.tasks.payload(t.task_id)) == run(store.tasks.get(t.task_id)).payload
    assert run(store.tasks.payload(t.task_id)) == p.Executing(current_step=3, pause_requested=True)


# -- transition --------------------------------------------------------------------


@covers("tasks.transition")
def test_a_legal_transition_applies_its_payload_and_columns(store: Store) -> None:
    t = created(store)
    meta = {"who": "me", "n": [1, 2.5, None, True]}
    now = run(
        store.tasks.transition(
            t.task_id, p.Planning(), point=None, update=TaskUpdate(extracted_metadata=meta)
        )
    )
    assert now is S.Planning
    planned = run(store.tasks.get(t.task_id))
    assert (planned.state, planned.payload, planned.phase) == (S.Planning, p.Planning(), "plan")
    assert planned.extracted_metadata == meta
    assert planned.updated_at >= t.updated_at
    plan = {"steps": [{"tool": "t", "args": {"k": "v"}}] * 2}
    update = TaskUpdate(
        plan=plan,
        execute_progress={"current_step": 0},
        template_hash="h2",
        error="a note",
    )
    assert run(store.tasks.transition(t.task_id, p.Executing(), point=None, update=update)) is (
        S.Executing
    )
    got = run(store.tasks.get(t.task_id))
    assert got.plan == plan and got.execute_progress == {"current_step": 0}
    assert (got.template_hash, got.error, got.phase) == ("h2", "a note", "execute")
    # None in a TaskUpdate leaves the column as it is
    assert got.extracted_metadata == meta
    # the rest of the row is the one created
    assert replace(got, **moving_columns(t)) == replace(t, **moving_columns(t))


@covers("tasks.transition")
def test_an_illegal_transition_is_refused_and_changes_nothing(store: Store) -> None:
    t = created(store)
    msg = b.message("illegal:1")
    with pytest.raises(IllegalTransition) as info:
        run(
            store.tasks.transition(
                t.task_id,
                p.Completed(),
                point=None,
                update=TaskUpdate(error="nope"),
                messages=[msg],
            )
        )
    assert (info.value.task_id, info.value.src, info.value.dst) == (
        t.task_id,
        "Extracting",
        "Completed",
    )
    assert run(store.tasks.get(t.task_id)) == t
    assert run(store.events.pending()) == []  # its messages went with it


@covers("tasks.transition")
def test_a_pause_goes_back_only_to_the_state_it_holds(store: Store) -> None:
    t = created(store, p.Planning())
    with pytest.raises(IllegalTransition):
        run(store.tasks.transition(t.task_id, p.Paused(then=p.Executing()), point=None))
    assert run(store.tasks.get(t.task_id)) == t


@covers("tasks.transition")
def test_terminal_states_are_absorbing(store: Store) -> None:
    for end in (p.Completed(), p.Failed(), p.Abandoned(), p.Cancelled()):
        t = created(store, end)
        with pytest.raises(IllegalTransition):
            run(store.tasks.transition(t.task_id, p.Failed(), point=None))
        assert run(store.tasks.get(t.task_id)) == t


@covers("tasks.transition", "events.pending")
def test_transition_queues_its_messages_in_its_commit(store: Store) -> None:
    t = created(store)
    msgs = [b.message(f"m:{i}", task_id=t.task_id) for i in range(3)]
    run(store.tasks.transition(t.task_id, p.Planning(), point=None, messages=msgs))
    assert run(store.events.pending()) == msgs


# -- reads for recovery ----------------------------------------------------------------


@covers("tasks.unfinished")
def test_unfinished_returns_unfinished_tasks_only_oldest_first(
    store: Store, backend: Backend
) -> None:
    wanted = []
    base = datetime.now(UTC) - timedelta(hours=1)
    for i, state in enumerate([S.Completed, S.Executing, S.Failed, S.Paused, S.Cancelled] * 3):
        at = rfc3339(base + timedelta(seconds=i))
        t = b.task(state, updated_at=at)
        run(store.tasks.create(t))
        if not state.terminal:
            wanted.append(t.task_id)
    got, malformed = run(store.tasks.unfinished())
    assert [t.task_id for t in got] == wanted
    assert malformed == []
    backend.check_unfinished_reads_an_index(store)


@covers("tasks.counts", "tasks.listing")
def test_counts_and_listing_by_state(store: Store) -> None:
    for state in (S.Executing, S.Executing, S.Failed):
        created(store, b.task(state).payload)
    assert run(store.tasks.counts()) == {"Executing": 2, "Failed": 1}
    assert {t.state for t in run(store.tasks.listing(["Failed"]))} == {S.Failed}
    assert len(run(store.tasks.listing(["Executing", "Failed"]))) == 3


@pytest.mark.parametrize(
    ("src", "payload"), RICH_PAYLOADS, ids=lambda v: getattr(v, "kind", str(v))
)
@covers("tasks.create", "tasks.transition", "tasks.get")
def test_typed_payloads_read_back_as_written(
    store: Store, src: TaskState, payload: p.Payload
) -> None:
    # written by create
    assert created(store, payload).payload == payload
    assert run(store.tasks.get(created(store, payload).task_id)).payload == payload
    # and by a transition
    before = created(store, b.task(src).payload)
    assert run(store.tasks.transition(before.task_id, payload, point=None)) is p.state_of(payload)
    assert run(store.tasks.get(before.task_id)).payload == payload


def moving_columns(t: TaskRecord) -> dict[str, Any]:
    """The columns a transition writes: the contract compares the rest as created."""
    return dict.fromkeys(
        (
            "state",
            "payload",
            "phase",
            "plan",
            "execute_progress",
            "extracted_metadata",
            "template_hash",
            "error",
            "updated_at",
        )
    )


@covers("tasks.resolve_id")
def test_a_task_is_found_by_its_id_or_an_unambiguous_prefix(store: Store) -> None:
    ids = ["abcd1234-one", "abcd1234-two", "abce0000-three"]
    for task_id in ids:
        run(store.tasks.create(replace(b.task(), task_id=task_id)))
    assert run(store.tasks.resolve_id("abcd1234-one")) == "abcd1234-one"
    assert run(store.tasks.resolve_id("abce")) == "abce0000-three"
    assert run(store.tasks.resolve_id("abcd1234-t")) == "abcd1234-two"
    with pytest.raises(AmbiguousId):
        run(store.tasks.resolve_id("abcd"))
    with pytest.raises(IdPrefixTooShort):
        run(store.tasks.resolve_id("abc"))
    with pytest.raises(UnknownTask, match="'ffff'"):
        run(store.tasks.resolve_id("ffff"))


def _workflow(directory: str, at: str) -> TaskRecord:
    t = b.task(updated_at=at)
    trigger = {"text": "run it", "payload": {"directory": directory}}
    return replace(t, kind=TaskKind.workflow, trigger_event=trigger, created_at=at)


@covers("tasks.latest_workflow_task")
def test_the_latest_workflow_task_of_a_directory_is_found(store: Store) -> None:
    assert run(store.tasks.latest_workflow_task("/w")) is None
    base = datetime.now(UTC) - timedelta(hours=1)
    older, newer = (_workflow("/w", rfc3339(base + timedelta(seconds=i))) for i in (1, 2))
    elsewhere = _workflow("/v", rfc3339(base + timedelta(seconds=3)))
    # a task of another kind about the same directory is no workflow's
    pipeline = replace(
        _workflow("/w", rfc3339(base + timedelta(seconds=4))), kind=TaskKind.pipeline
    )
    for t in (newer, older, elsewhere, pipeline):
        run(store.tasks.create(t))
    assert run(store.tasks.latest_workflow_task("/w")) == newer.task_id
    assert run(store.tasks.latest_workflow_task("/v")) == elsewhere.task_id
    assert run(store.tasks.latest_workflow_task("/nowhere")) is None
