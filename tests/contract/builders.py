"""Records the contract writes: tasks, events, steps, questions and messages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pfar.answers import Answer, Approve, Deny
from pfar.journal import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    Idempotency,
    InboundEvent,
    Move,
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from pfar.journal.message_key_parse import read_message_key
from pfar.journal.message_keys import MessageKey, MessageKind
from pfar.journal.payloads import Executing, Failed, Grant, Payload, state_of
from pfar.journal.records import now_rfc3339, rfc3339
from tests.support import payload_for


def task(
    state: TaskState = TaskState.Extracting,
    *,
    payload: Payload | None = None,
    event_id: str | None = None,
    text: str = "hello",
    updated_at: str | None = None,
) -> TaskRecord:
    payload = payload if payload is not None else payload_for(state)
    state = state_of(payload)
    now = updated_at or now_rfc3339()
    return TaskRecord(
        task_id=str(uuid.uuid4()),
        template_id="tpl",
        principal="owner",
        trigger_event={"text": text, "event_id": event_id},
        state=state,
        payload=payload,
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


def event(event_id: str, text: str = "hello") -> InboundEvent:
    return InboundEvent(event_id=event_id, adapter="contract", template_id="tpl", text=text)


def step(
    task_id: str, i: int, status: StepStatus = StepStatus.started, result: Any = None
) -> StepRecord:
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


def approval(
    task_id: str,
    step: int = 1,
    *,
    expires_in: float = 3600,
    options: tuple[str, ...] = ("approve", "deny"),
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
        args_sha256="a" * 64,
    )


def prompt(task_id: str, step: int = 2, *, expires_in: float = 600) -> CredentialPromptRecord:
    now = datetime.now(UTC)
    return CredentialPromptRecord(
        prompt_id=str(uuid.uuid4()),
        task_id=task_id,
        service="notion",
        credential_type="api_key",
        instructions="paste it",
        vault_ref="vault:notion_token",
        message_id=None,
        created_at=rfc3339(now),
        expires_at=rfc3339(now + timedelta(seconds=expires_in)),
        status=CredentialStatus.pending,
        step=step,
        received_at=None,
    )


def key(text: str) -> MessageKey:
    """The key of text as a stored row holds it."""
    return read_message_key(text)


def message(
    key: str, kind: str = "notice", body: str = "hi", task_id: str | None = None
) -> OwnerMessage:
    """A message whose key is read as a stored one is (a test's "m1" is an `OtherKey`)."""
    return OwnerMessage(read_message_key(key), MessageKind(kind), body, task_id)


def resume_to(task: TaskRecord, a: ApprovalRecord, answer: Answer) -> Move:
    """The store's side of an answer, independent of any runner: approve runs the step
    with a grant, deny fails the task."""
    step = a.step or 0
    match answer:
        case Approve():
            grant = Grant(step=step, args_sha256=a.args_sha256)
            return Move(Executing(current_step=step, approved=grant, retry_step=step))
        case Deny():
            return Move(Failed(), TaskUpdate(error="denied by the owner"))
        case _:
            raise AssertionError(f"the contract offers no {answer.kind!r}")
