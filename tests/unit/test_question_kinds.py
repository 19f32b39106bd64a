"""The kinds of question pfar asks are a closed set whose values are the stored text; a
stored question of a kind this pfar does not know is kept as it is, and is still
listed, answered and expired as a question with no kind of its own."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pfar.answers import Deny
from pfar.journal import ApprovalRecord, ApprovalStatus, Journal, Semantics, TaskRecord, TaskState
from pfar.journal.payloads import AwaitingApproval, Executing, Planning
from pfar.journal.question_kinds import (
    OtherQuestionKind,
    QuestionKind,
    read_question_kind,
)
from pfar.journal.records import TaskUpdate, now_rfc3339, rfc3339
from pfar.journal.sqlite import open_journal
from pfar.kernel.api.requests import APPROVAL_SHOW
from pfar.kernel.api.views import ApprovalView
from pfar.policy.approvals import ApprovalRule, approval_needed
from pfar.runners.asking import answer_outcome, approval_message
from pfar.runners.workflow.answers import QUESTIONS
from pfar.runners.workflow.recovery_check import TraceState
from pfar.vault.driver import sqlite
from tests.support import payload_for


def test_the_kinds_are_the_stored_text() -> None:
    assert {k.value for k in QuestionKind} == {
        "tainted_write",
        "write",
        "tool_missing",
        "write_in_doubt",
        "cloud_routing",
        "template_changed",
        "permission",
        "drift",
        "spend_cap",
        "in_flight_deaths",
        "workflow_not_started",
        "workflow_completed",
        "workflow_between_steps",
        "workflow_mid_step",
        "workflow_failed",
    }
    # a traced workflow asks one kind per state of its trace, stored as before
    assert set(QUESTIONS) == set(TraceState)
    assert all(QUESTIONS[s] == f"workflow_{s.value}" for s in TraceState)
    assert read_question_kind("permission") is QuestionKind.permission
    assert read_question_kind("teleport") == OtherQuestionKind("teleport")


def test_the_write_policy_names_a_kind() -> None:
    rule = ApprovalRule(require=frozenset({"x"}), tainted_writes=True, on_deny="fail")
    need = approval_needed(rule, "x", Semantics.Write, [])
    assert need is not None and need.action_type is QuestionKind.write
    need = approval_needed(rule, "y", Semantics.Write, ["Raw"])
    assert need is not None and need.action_type is QuestionKind.tainted_write


def _task() -> TaskRecord:
    now = now_rfc3339()
    return TaskRecord(
        task_id=str(uuid.uuid4()),
        template_id="tpl",
        principal="owner",
        trigger_event={"text": "hello", "event_id": None},
        state=TaskState.Extracting,
        payload=payload_for(TaskState.Extracting),
        phase=TaskState.Extracting.phase,
        plan=None,
        execute_progress=None,
        extracted_metadata=None,
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id="trace",
        created_at=now,
        updated_at=now,
        error=None,
        event_id=None,
        template_hash="h",
        recovery_attempts=0,
    )


def _parked(journal: Journal, expires_in: float) -> ApprovalRecord:
    """A task parked on a template's write approval, as pfar writes it."""
    t = _task()
    now = datetime.now(UTC)
    a = ApprovalRecord(
        approval_id=str(uuid.uuid4()),
        task_id=t.task_id,
        action_type=QuestionKind.write,
        description="may I?",
        data_preview=None,
        taint_level=None,
        target_sink="shell.run",
        tool="shell.run",
        step=0,
        created_at=rfc3339(now),
        expires_at=rfc3339(now + timedelta(seconds=expires_in)),
        status=ApprovalStatus.pending,
        options=["approve", "deny"],
        decision=None,
        decided_at=None,
        prompts_sent=0,
    )

    async def go() -> None:
        await journal.tasks.create(t)
        await journal.tasks.transition(
            t.task_id, Planning(), point="extracted", update=TaskUpdate(extracted_metadata={})
        )
        plan = TaskUpdate(plan={"steps": [{"tool": "shell.run", "args": {}}]})
        await journal.tasks.transition(t.task_id, Executing(), point="planned", update=plan)
        parked = AwaitingApproval(approval_id=a.approval_id, step=0)
        await journal.questions.park_approval(a, approval_message(a, 0), parked)

    asyncio.run(go())
    return a


def _stored_kinds(path: Path) -> list[str]:
    with sqlite.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT action_type FROM pending_approvals")]


def test_a_question_of_an_unknown_kind_is_kept_and_still_answered(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    journal = open_journal(path, create=True)
    try:
        answered = _parked(journal, expires_in=3600)
        expiring = _parked(journal, expires_in=60)
        with sqlite.connect(path) as conn:  # as a newer pfar (or a hand) might have
            conn.execute("UPDATE pending_approvals SET action_type = 'teleport'")

        # listed, read one by one, shown and sent as what it is
        listed = asyncio.run(journal.questions.approvals())
        assert [a.action_type for a in listed] == [OtherQuestionKind("teleport")] * 2
        one = ApprovalView.of(asyncio.run(journal.questions.approval(answered.approval_id)))
        assert str(one.action_type) == "teleport"
        sent = APPROVAL_SHOW.reply.dump(one)
        assert sent["action_type"] == {"stored": "teleport"}
        assert APPROVAL_SHOW.reply.parse(sent, "approval_show") == one

        # answered as a question with no kind of its own: a "deny" fails the task
        decided, changed = asyncio.run(
            journal.questions.decide_approval(
                answered.approval_id, Deny(), resume_to=answer_outcome, by="cli"
            )
        )
        assert changed and decided.status is ApprovalStatus.denied
        assert asyncio.run(journal.tasks.get(answered.task_id)).state is TaskState.Failed

        # the expiry sweep goes over it like any other (unanswered: its task fails)
        later = rfc3339(datetime.now(UTC) + timedelta(hours=2))
        failed = asyncio.run(journal.questions.expire_due(later))
        assert [tid for tid, _ in failed] == [expiring.task_id]
        assert asyncio.run(journal.tasks.get(expiring.task_id)).state is TaskState.Failed
    finally:
        journal.close()
    assert _stored_kinds(path) == ["teleport", "teleport"]  # nothing rewritten


def test_the_kinds_pfar_asks_are_stored_as_before(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    journal = open_journal(path, create=True)
    try:
        a = _parked(journal, expires_in=3600)
        (read,) = asyncio.run(journal.questions.approvals())
        assert read.action_type is QuestionKind.write and read.approval_id == a.approval_id
        sent = APPROVAL_SHOW.reply.dump(ApprovalView.of(read))
        assert sent["action_type"] == "write"
        assert APPROVAL_SHOW.reply.parse(sent, "approval_show").action_type is QuestionKind.write
    finally:
        journal.close()
    assert _stored_kinds(path) == ["write"]
