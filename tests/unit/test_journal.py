"""The Journal against a real SQLite file: exactly-once creation, steps, approvals,
group commit, the partial index, cleanup, and plain-JSON storage."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pfar.answers import Answer, Approve, Deny, Rerun
from pfar.errors import (
    AlreadyDecided,
    IdPrefixTooShort,
    IllegalTransition,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownTask,
    VaultMissing,
    WriteRefused,
)
from pfar.journal import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    Idempotency,
    InboundEvent,
    Journal,
    Move,
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
    TaskUpdate,
    steps_sql,
)
from pfar.journal.message_keys import FailedKey, MessageKind, ResultKey
from pfar.journal.payloads import SPENT_BY_A_RUN, AwaitingApproval, Completed, Executing, Planning
from pfar.journal.records import now_rfc3339, rfc3339
from pfar.journal.sqlite import open_journal, open_readonly
from pfar.runners.asking import answer_outcome, approval_message, credential_message
from pfar.runners.workflow.answers import answer_outcome as workflow_answer_outcome
from pfar.vault.driver import sqlite
from tests.support import payload_for

S = TaskState


def _task(
    task_id: str | None = None,
    *,
    state: TaskState = S.Extracting,
    updated_at: str | None = None,
    event_id: str | None = None,
    text: str = "hello",
) -> TaskRecord:
    now = updated_at or now_rfc3339()
    return TaskRecord(
        task_id=task_id or str(uuid.uuid4()),
        template_id="tpl",
        principal="owner",
        trigger_event={"text": text, "event_id": event_id},
        state=state,
        payload=payload_for(state),
        phase=state.phase,
        plan=None,
        execute_progress=None,
        extracted_metadata=None,
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id="trace",
        created_at=now,
        updated_at=now,
        error=None,
        event_id=event_id,
        template_hash="h",
        recovery_attempts=0,
    )


def _event(event_id: str, text: str = "hello") -> InboundEvent:
    return InboundEvent(event_id=event_id, adapter="test", template_id="tpl", text=text)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = open_journal(tmp_path / "sessions.db", create=True)
    yield j
    j.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _to_executing(j: Journal, task_id: str, plan_steps: int = 3) -> None:
    await j.tasks.transition(
        task_id, Planning(), point="extracted", update=TaskUpdate(extracted_metadata={"k": "v"})
    )
    await j.tasks.transition(
        task_id,
        Executing(),
        point="planned",
        update=TaskUpdate(plan={"steps": [{"tool": "t", "args": {}}] * plan_steps}),
    )


# -- opening ---------------------------------------------------------------------


def test_open_without_create_refuses_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "sessions.db"
    with pytest.raises(VaultMissing, match="pfar init"):
        open_journal(missing)
    assert not missing.exists()


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    j = open_journal(path, create=True)
    t = _task()
    run(j.tasks.create(t))
    run(
        j.tasks.transition(
            t.task_id, Planning(), point=None, update=TaskUpdate(extracted_metadata={"a": [1, 2]})
        )
    )
    j.close()
    j2 = open_journal(path)
    try:
        got = run(j2.tasks.get(t.task_id))
        assert got.state is S.Planning
        assert got.extracted_metadata == {"a": [1, 2]}
    finally:
        j2.close()
    ro = open_readonly(path)
    try:
        assert run(ro.tasks.get(t.task_id)).state is S.Planning
        with pytest.raises(RuntimeError, match="read-only"):
            run(ro.tasks.transition(t.task_id, Executing(), point=None))
    finally:
        ro.close()


# -- creation and event dedupe -------------------------------------------------------


def test_same_event_twice_creates_one_task(journal: Journal) -> None:
    first = _task(event_id="ev-1")
    second = _task(event_id="ev-1", text="a different text")
    got1, created1 = run(journal.tasks.create(first, _event("ev-1")))
    got2, created2 = run(journal.tasks.create(second, _event("ev-1", "a different text")))
    assert created1 is True and created2 is False
    assert got2 == got1 == first
    assert [t.task_id for t in run(journal.tasks.listing())] == [first.task_id]
    with pytest.raises(UnknownTask):
        run(journal.tasks.get(second.task_id))


def test_concurrent_redeliveries_create_one_task(journal: Journal) -> None:
    async def go() -> list[tuple[TaskRecord, bool]]:
        return await asyncio.gather(
            *(journal.tasks.create(_task(event_id="ev-x"), _event("ev-x")) for _ in range(20))
        )

    results = run(go())
    assert sum(created for _, created in results) == 1
    assert len({t.task_id for t, _ in results}) == 1
    assert len(run(journal.tasks.listing())) == 1


def test_different_events_create_different_tasks(journal: Journal) -> None:
    for i in range(5):
        run(journal.tasks.create(_task(event_id=f"e{i}"), _event(f"e{i}")))
    assert len(run(journal.tasks.listing())) == 5


def test_create_without_event_always_creates(journal: Journal) -> None:
    run(journal.tasks.create(_task()))
    run(journal.tasks.create(_task()))
    assert len(run(journal.tasks.listing())) == 2


def test_same_task_id_twice_is_refused_and_first_kept(journal: Journal) -> None:
    t = _task("dup", text="first")
    run(journal.tasks.create(t))
    with pytest.raises(WriteRefused):
        run(journal.tasks.create(_task("dup", text="second")))
    assert run(journal.tasks.get("dup")).input_text == "first"


def test_unknown_task_is_named(journal: Journal) -> None:
    with pytest.raises(UnknownTask, match="'nope'"):
        run(journal.tasks.get("nope"))
    with pytest.raises(UnknownTask):
        run(journal.tasks.resolve_id("abcd"))


def test_resolve_task_id_by_prefix(journal: Journal) -> None:
    t = _task("0123456789abcdef")
    run(journal.tasks.create(t))
    assert run(journal.tasks.resolve_id("01234567")) == t.task_id
    with pytest.raises(IdPrefixTooShort, match="'012' is too short: give at least 4"):
        run(journal.tasks.resolve_id("012"))


# -- steps -------------------------------------------------------------------------


def _step(task_id: str, i: int, status: StepStatus, result: Any = None) -> StepRecord:
    now = now_rfc3339()
    return StepRecord(
        task_id=task_id,
        step=i,
        tool="http.request",
        semantics=Semantics.Write,
        idempotency=Idempotency.key,
        status=status,
        args={"url": "http://x", "n": i},
        result=result,
        label="Raw",
        started_at=now,
        completed_at=None if status is StepStatus.started else now,
        error=None,
    )


def test_step_rows_and_progress(journal: Journal) -> None:
    t = _task()

    async def go() -> None:
        await journal.tasks.create(t)
        await _to_executing(journal, t.task_id)
        await journal.tasks.step_started(_step(t.task_id, 0, StepStatus.started))
        (row,) = await journal.tasks.steps(t.task_id)
        assert row.status is StepStatus.started and row.result is None
        assert row.completed_at is None
        # a retry of a started step overwrites it, never duplicates it
        await journal.tasks.step_started(_step(t.task_id, 0, StepStatus.started))
        assert len(await journal.tasks.steps(t.task_id)) == 1
        await journal.tasks.step_finished(
            _step(t.task_id, 0, StepStatus.completed, {"status": 200, "body": "ünï"}), next_step=1
        )
        # a read's outcome is journaled without a start
        await journal.tasks.step_finished(
            _step(t.task_id, 1, StepStatus.completed, ["a", 1]), next_step=2
        )

    run(go())
    steps = run(journal.tasks.steps(t.task_id))
    assert [(s.step, s.status) for s in steps] == [
        (0, StepStatus.completed),
        (1, StepStatus.completed),
    ]
    assert steps[0].result == {"status": 200, "body": "ünï"}
    assert steps[0].args == {"url": "http://x", "n": 0}
    assert steps[0].semantics is Semantics.Write and steps[0].idempotency is Idempotency.key
    assert steps[1].result == ["a", 1]
    task = run(journal.tasks.get(t.task_id))
    assert task.state is S.Executing
    assert task.current_step == 2
    assert task.execute_progress is not None
    assert task.execute_progress["current_step"] == 2
    assert task.execute_progress["last_completed"] == 1
    # a step's time is kept with the progress; updated_at (indexed) moves at phase changes
    assert task.last_activity == task.execute_progress["last_step_at"]


def test_step_failed_fails_the_task_and_queues_the_notice_atomically(journal: Journal) -> None:
    t = _task()
    msg = OwnerMessage(FailedKey(t.task_id), MessageKind.notice, "it broke", t.task_id)

    async def go() -> None:
        await journal.tasks.create(t)
        await _to_executing(journal, t.task_id)
        await journal.tasks.step_started(_step(t.task_id, 0, StepStatus.started))
        failed = _step(t.task_id, 0, StepStatus.failed)
        await journal.tasks.step_failed(failed, "step 1 of 3: boom", [msg])

    run(go())
    task = run(journal.tasks.get(t.task_id))
    assert task.state is S.Failed and task.error == "step 1 of 3: boom"
    assert run(journal.tasks.steps(t.task_id))[0].status is StepStatus.failed
    assert [m.message_key.text for m in run(journal.events.pending())] == [f"failed:{t.task_id}"]


def test_step_failed_on_a_finished_task_changes_nothing(journal: Journal) -> None:
    t = _task(state=S.Completed)
    run(journal.tasks.create(t))
    with pytest.raises(IllegalTransition):
        run(journal.tasks.step_failed(_step(t.task_id, 0, StepStatus.failed), "late", []))
    assert run(journal.tasks.steps(t.task_id)) == []  # the whole commit was refused, the row too
    assert run(journal.tasks.get(t.task_id)) == t


# -- approvals ---------------------------------------------------------------------


def _approval(
    task_id: str,
    step: int = 1,
    *,
    expires_in: float = 3600,
    options: tuple[str, ...] | list[str] = ("approve", "deny"),
) -> ApprovalRecord:
    now = datetime.now(UTC)
    return ApprovalRecord(
        approval_id=str(uuid.uuid4()),
        task_id=task_id,
        action_type="write",
        description="may I?",
        data_preview=None,
        taint_level=None,
        target_sink="shell.run",
        tool="shell.run",
        step=step,
        created_at=rfc3339(now),
        expires_at=rfc3339(now + timedelta(seconds=expires_in)),
        status=ApprovalStatus.pending,
        options=list(options),
        decision=None,
        decided_at=None,
        prompts_sent=0,
    )


def _parked(journal: Journal, **kw: Any) -> tuple[TaskRecord, ApprovalRecord]:
    t = _task()
    a = _approval(t.task_id, **kw)

    async def go() -> None:
        await journal.tasks.create(t)
        await _to_executing(journal, t.task_id)
        parked = AwaitingApproval(approval_id=a.approval_id, step=a.step or 0)
        await journal.questions.park_approval(a, approval_message(a, 0), parked)

    run(go())
    return t, a


def test_park_approval_is_one_commit(journal: Journal) -> None:
    t, a = _parked(journal)
    task = run(journal.tasks.get(t.task_id))
    assert task.state is S.AwaitingApproval
    assert task.payload == AwaitingApproval(approval_id=a.approval_id, step=1)
    stored = run(journal.questions.approval(a.approval_id))
    assert stored.status is ApprovalStatus.pending and stored.prompts_sent == 1
    assert [m.kind for m in run(journal.events.pending())] == ["approval"]


def test_decide_approval_is_idempotent(journal: Journal) -> None:
    t, a = _parked(journal)
    calls: list[str] = []

    def resume_to(task: TaskRecord, ap: ApprovalRecord, answer: Answer) -> Move:
        calls.append(answer.kind)
        return answer_outcome(task, ap, answer)

    decided, changed = run(
        journal.questions.decide_approval(a.approval_id, Approve(), resume_to=resume_to, by="cli")
    )
    assert changed is True
    assert decided.status is ApprovalStatus.approved and decided.decision == "approve"
    after_first = run(journal.tasks.get(t.task_id))
    assert after_first.state is S.Executing
    assert isinstance(after_first.payload, Executing)
    assert after_first.payload.approved is not None and after_first.payload.approved.step == 1

    again, changed2 = run(
        journal.questions.decide_approval(a.approval_id, Approve(), resume_to=resume_to, by="cli")
    )
    assert changed2 is False
    assert again == decided  # same decided_at: nothing was written
    assert run(journal.tasks.get(t.task_id)) == after_first  # one effect on the task
    assert calls == ["approve"]  # the task was moved once

    with pytest.raises(AlreadyDecided) as info:
        run(journal.questions.decide_approval(a.approval_id, Deny(), resume_to=resume_to, by="cli"))
    assert a.approval_id in str(info.value)
    assert "already approved (approve)" in str(info.value)
    assert run(journal.questions.approval(a.approval_id)) == decided
    assert run(journal.tasks.get(t.task_id)) == after_first


@pytest.mark.parametrize(
    ("resume_to", "answer"), [(answer_outcome, Approve()), (workflow_answer_outcome, Rerun())]
)
def test_the_run_an_answer_starts_spends_it(
    journal: Journal, resume_to: Any, answer: Answer
) -> None:
    """A grant (and its retry) or a workflow's decision covers one run: the commit that
    records the run's start drops it, so a crash during that run leaves nothing to reuse."""
    t, a = _parked(journal, options=["approve", answer.kind])
    run(journal.questions.decide_approval(a.approval_id, answer, resume_to=resume_to, by="cli"))
    answered = run(journal.tasks.get(t.task_id)).payload
    assert isinstance(answered, Executing)
    assert any(getattr(answered, name) is not None for name in SPENT_BY_A_RUN)
    run(journal.tasks.step_started(_step(t.task_id, 1, StepStatus.started)))
    after = run(journal.tasks.get(t.task_id))
    assert after.payload == replace(answered, **dict.fromkeys(SPENT_BY_A_RUN))
    assert after.state is S.Executing and after.current_step == 1


def test_concurrent_identical_answers_have_one_effect(journal: Journal) -> None:
    _t, a = _parked(journal)

    async def go() -> list[tuple[ApprovalRecord, bool]]:
        return await asyncio.gather(
            *(
                journal.questions.decide_approval(
                    a.approval_id, Approve(), resume_to=answer_outcome, by="cli"
                )
                for _ in range(10)
            )
        )

    results = run(go())
    assert sum(changed for _, changed in results) == 1
    assert len({r.decided_at for r, _ in results}) == 1


def test_deny_fails_the_task(journal: Journal) -> None:
    t, a = _parked(journal)
    decided, changed = run(
        journal.questions.decide_approval(a.approval_id, Deny(), resume_to=answer_outcome, by="cli")
    )
    assert changed and decided.status is ApprovalStatus.denied
    task = run(journal.tasks.get(t.task_id))
    assert task.state is S.Failed and "denied by the owner" in (task.error or "")


def test_an_answer_not_offered_is_refused(journal: Journal) -> None:
    t, a = _parked(journal)
    with pytest.raises(ValueError, match="offers approve, deny; got 'rerun'"):
        run(
            journal.questions.decide_approval(
                a.approval_id, Rerun(), resume_to=answer_outcome, by="cli"
            )
        )
    assert run(journal.questions.approval(a.approval_id)).status is ApprovalStatus.pending
    assert run(journal.tasks.get(t.task_id)).state is S.AwaitingApproval


def test_unknown_approval_and_prompt_are_named(journal: Journal) -> None:
    with pytest.raises(UnknownApproval, match="'zzz'"):
        run(journal.questions.decide_approval("zzz", Approve(), resume_to=answer_outcome, by="cli"))
    with pytest.raises(UnknownApproval):
        run(journal.questions.approval("zzz"))
    with pytest.raises(UnknownCredentialPrompt, match="'ppp'"):
        run(journal.questions.receive_credential("ppp", "cli"))


def test_expired_approval_fails_its_task_and_refuses_late_answers(journal: Journal) -> None:
    t, a = _parked(journal, expires_in=-1)
    _, live = _parked(journal)
    failed = run(journal.questions.expire_due(now_rfc3339()))
    assert failed == [(t.task_id, "approval timeout")]
    assert run(journal.tasks.get(t.task_id)).state is S.Failed
    assert run(journal.questions.approval(a.approval_id)).status is ApprovalStatus.expired
    assert run(journal.questions.approval(live.approval_id)).status is ApprovalStatus.pending
    with pytest.raises(AlreadyDecided, match="expired"):
        run(
            journal.questions.decide_approval(
                a.approval_id, Approve(), resume_to=answer_outcome, by="cli"
            )
        )
    assert run(journal.questions.expire_due(now_rfc3339())) == []  # once


def test_credential_received_once(journal: Journal) -> None:
    t = _task()
    now = datetime.now(UTC)
    p = CredentialPromptRecord(
        prompt_id=str(uuid.uuid4()),
        task_id=t.task_id,
        service="notion",
        credential_type="api_key",
        instructions="paste it",
        vault_ref="vault:notion_token",
        message_id=None,
        created_at=rfc3339(now),
        expires_at=rfc3339(now + timedelta(minutes=10)),
        status=CredentialStatus.pending,
        step=2,
        received_at=None,
    )

    async def go() -> None:
        await journal.tasks.create(t)
        await _to_executing(journal, t.task_id)
        await journal.questions.park_credential(p, credential_message(p, 0))

    run(go())
    assert run(journal.tasks.get(t.task_id)).state is S.AwaitingCredential
    assert (
        run(journal.questions.credential_prompt(p.prompt_id)).message_id
        == f"credential:{p.prompt_id}:0"
    )
    done, changed = run(journal.questions.receive_credential(p.prompt_id, "cli"))
    assert changed and done.status is CredentialStatus.received
    task = run(journal.tasks.get(t.task_id))
    assert task.state is S.Executing and task.current_step == 2
    with pytest.raises(AlreadyDecided, match="already received"):
        run(journal.questions.receive_credential(p.prompt_id, "cli"))
    assert run(journal.tasks.get(t.task_id)) == task


# -- owner outbox -------------------------------------------------------------------


def test_a_message_key_is_queued_once(journal: Journal) -> None:
    m = OwnerMessage(ResultKey("x"), MessageKind.result, "hi", None)
    run(journal.events.enqueue([m]))
    run(journal.events.enqueue([OwnerMessage(ResultKey("x"), MessageKind.result, "changed", None)]))
    assert run(journal.events.pending()) == [m]
    journal.events.mark_delivered([ResultKey("x")])  # outside a loop: committed at once
    assert run(journal.events.pending()) == []
    run(journal.events.enqueue([m]))  # a resend after delivery is still a no-op
    assert run(journal.events.pending()) == []


# -- group commit --------------------------------------------------------------------


def test_group_commit_shares_commits(journal: Journal) -> None:
    tasks = [_task() for _ in range(64)]
    for t in tasks:
        run(journal.tasks.create(t))
    w = journal.writer
    commits0, writes0 = w.commits, w.writes

    async def go() -> None:
        await asyncio.gather(
            *(journal.tasks.transition(t.task_id, Planning(), point=None) for t in tasks)
        )

    run(go())
    commits, writes = w.commits - commits0, w.writes - writes0
    assert writes == 64
    assert commits < writes, (commits, writes)
    assert all(run(journal.tasks.get(t.task_id)).state is S.Planning for t in tasks)


def test_a_refused_write_does_not_undo_its_batch_neighbours(journal: Journal) -> None:
    tasks = [_task() for _ in range(30)]
    for t in tasks:
        run(journal.tasks.create(t))

    async def go() -> list[Any]:
        # every third transition is illegal (Extracting -> Completed)
        return await asyncio.gather(
            *(
                journal.tasks.transition(
                    t.task_id, Completed() if i % 3 == 0 else Planning(), point=None
                )
                for i, t in enumerate(tasks)
            ),
            return_exceptions=True,
        )

    results = run(go())
    for i, (t, r) in enumerate(zip(tasks, results, strict=True)):
        if i % 3 == 0:
            assert isinstance(r, IllegalTransition)
            assert run(journal.tasks.get(t.task_id)) == t
        else:
            assert r is S.Planning  # the state it is in now
            assert run(journal.tasks.get(t.task_id)).state is S.Planning


# -- the partial index ---------------------------------------------------------------


def test_unfinished_reads_through_the_partial_index(journal: Journal) -> None:
    base = datetime.now(UTC) - timedelta(hours=1)
    wanted = []
    for i, state in enumerate([S.Completed, S.Executing, S.Failed, S.Planning, S.Abandoned] * 4):
        t = _task(state=state, updated_at=rfc3339(base + timedelta(seconds=i)))
        run(journal.tasks.create(t))
        if not state.terminal:
            wanted.append(t.task_id)

    seen: list[str] = []
    conn = journal._db.scanner  # unfinished() is a scan, on its own connection
    conn.set_trace_callback(seen.append)
    try:
        got, malformed = run(journal.tasks.unfinished())
        assert malformed == []
    finally:
        conn.set_trace_callback(None)
    assert [t.task_id for t in got] == wanted  # unfinished only, oldest first
    (sql,) = [s for s in seen if "task_journal" in s]
    plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    assert "idx_task_journal_unfinished" in plan, plan
    # a walk of the partial index only (it holds unfinished rows), already in updated_at order
    assert "TEMP B-TREE" not in plan, plan


# -- cleanup -------------------------------------------------------------------------


def test_cleanup_deletes_only_old_finished_tasks(journal: Journal) -> None:
    now = datetime.now(UTC)
    completed_before = rfc3339(now - timedelta(days=1))
    failed_before = rfc3339(now - timedelta(days=7))
    ages = {"fresh": timedelta(hours=1), "2d": timedelta(days=2), "8d": timedelta(days=8)}
    ids: dict[tuple[str, str], str] = {}
    for state in S:
        for name, age in ages.items():
            t = _task(state=state, updated_at=rfc3339(now - age), event_id=f"{state}-{name}")
            run(journal.tasks.create(t, _event(f"{state}-{name}")))
            ids[(state.value, name)] = t.task_id
    old_completed = ids[("Completed", "2d")]
    # a step row of the old task (written directly: step_finished would refresh updated_at)
    done = _step(old_completed, 0, StepStatus.completed, {})
    journal._db.writer.run(lambda conn: steps_sql.finish_txn(conn, done))
    assert len(run(journal.tasks.steps(old_completed))) == 1

    removed = run(journal.tasks.cleanup(completed_before, failed_before))

    gone = {
        ("Completed", "2d"),
        ("Completed", "8d"),
        ("Failed", "8d"),
        ("Abandoned", "8d"),
        ("Cancelled", "8d"),  # kept as long as a failure: the owner may ask what it did
    }
    assert removed == len(gone)
    left = {t.task_id for t in run(journal.tasks.listing(limit=1000))}
    for key, tid in ids.items():
        assert (tid in left) == (key not in gone), key
    # the rows that hang off a deleted task went with it
    assert run(journal.tasks.steps(old_completed)) == []
    # and a redelivery of a live task's event still finds its task
    live = ids[("Executing", "8d")]
    got, created = run(journal.tasks.create(_task(), _event("Executing-8d")))
    assert (got.task_id, created) == (live, False)


# -- storage is plain JSON text -----------------------------------------------------


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(meta=st.dictionaries(st.text(), json_values, max_size=5), result=json_values)
def test_values_round_trip_as_json_text(
    journal: Journal, meta: dict[str, Any], result: Any
) -> None:
    t = _task()

    async def go() -> None:
        await journal.tasks.create(t)
        await journal.tasks.transition(
            t.task_id, Planning(), point=None, update=TaskUpdate(extracted_metadata=meta)
        )
        await journal.tasks.transition(
            t.task_id, Executing(), point=None, update=TaskUpdate(plan={"steps": []})
        )
        await journal.tasks.step_finished(
            _step(t.task_id, 0, StepStatus.completed, result), next_step=1
        )

    run(go())
    assert run(journal.tasks.get(t.task_id)).extracted_metadata == meta
    assert run(journal.tasks.steps(t.task_id))[0].result == result


JSON_COLUMNS = {
    "task_journal": [
        "trigger_event",
        "plan_json",
        "execute_progress",
        "extracted_metadata",
        "output_sinks",
        "state_detail",
    ],
    "task_steps": ["args_json", "result_json"],
    "pending_approvals": ["options_json"],
    "adapter_state": ["state_json"],
}


def test_no_pickle_every_stored_value_is_text_or_number(journal: Journal, tmp_path: Path) -> None:
    _, a = _parked(journal)
    t = _task()
    run(journal.tasks.create(t, _event("ev-json")))
    run(journal.adapters.put("telegram", {"last_offset": 12}))
    run(
        journal.questions.decide_approval(
            a.approval_id, Approve(), resume_to=answer_outcome, by="cli"
        )
    )
    run(
        journal.tasks.step_finished(
            _step(a.task_id, 1, StepStatus.completed, {"x": 1}), next_step=2
        )
    )

    conn = sqlite.connect(tmp_path / "sessions.db")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        checked = 0
        for table in tables:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            for col in cols:
                for kind, value in conn.execute(f"SELECT typeof({col}), {col} FROM {table}"):
                    assert kind in ("text", "integer", "null"), (table, col, kind)
                    checked += 1
                    if kind == "text":
                        assert not value.startswith("\x80"), (table, col)  # pickle magic
            for col in JSON_COLUMNS.get(table, []):
                for (value,) in conn.execute(f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL"):
                    json.loads(value)
        assert checked > 50
    finally:
        conn.close()
    assert run(journal.adapters.get("telegram")) == {"last_offset": 12}


def test_no_module_of_the_journal_imports_pickle() -> None:
    import pfar.journal

    root = Path(pfar.journal.__file__).parent
    for src in root.rglob("*.py"):
        text = src.read_text()
        assert "import pickle" not in text and "marshal" not in text, src
