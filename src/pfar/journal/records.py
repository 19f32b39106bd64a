"""Typed records of the journal: what a row holds, as plain data (JSON in, JSON out)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .states import TaskState

JSON = Any  # a value json.dumps accepts


def now_rfc3339() -> str:
    """UTC, microseconds, 'Z': sorts as text in the order it happened."""
    now = time.time()
    seconds = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + (
        f".{int((now - seconds) * 1_000_000):06d}Z"
    )


def parse_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps(value: JSON) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def loads(text: str | None) -> JSON:
    return None if text is None else json.loads(text)


class Semantics(StrEnum):
    Read = "Read"
    Write = "Write"


class Idempotency(StrEnum):
    """How a tool avoids repeating its effect when a call is retried."""

    none = "none"  # no protection: a write in doubt goes to the owner
    key = "key"  # carries an idempotency key the far side honours
    check = "check"  # can check whether its effect already exists


class StepStatus(StrEnum):
    started = "started"
    completed = "completed"
    failed = "failed"
    skipped = "skipped"
    # cut off by the owner's cancel while it ran: it may have had (some of) its effects
    cancelled = "cancelled"


class ApprovalStatus(StrEnum):
    pending = "pending"
    approved = "approved"
    denied = "denied"
    expired = "expired"
    recovered = "recovered"
    withdrawn = "withdrawn"  # its task was cancelled: the question no longer stands


class CredentialStatus(StrEnum):
    pending = "pending"
    received = "received"
    expired = "expired"
    withdrawn = "withdrawn"  # its task was cancelled


@dataclass(frozen=True, slots=True)
class InboundEvent:
    """Something from outside that may start a task; `event_id` makes it exactly-once."""

    event_id: str
    adapter: str
    template_id: str
    text: str
    principal: str = "owner"
    payload: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        return {
            "event_id": self.event_id,
            "adapter": self.adapter,
            "template_id": self.template_id,
            "text": self.text,
            "principal": self.principal,
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One `task_journal` row."""

    task_id: str
    template_id: str
    principal: str
    trigger_event: dict[str, JSON] | None
    state: TaskState
    detail: dict[str, JSON]
    phase: str
    plan: dict[str, JSON] | None
    execute_progress: dict[str, JSON] | None
    extracted_metadata: dict[str, JSON] | None
    data_ceiling: str
    output_sinks: list[str]
    trace_id: str | None
    created_at: str
    updated_at: str
    error: str | None
    event_id: str | None
    template_hash: str
    recovery_attempts: int

    @property
    def current_step(self) -> int:
        return int(self.detail.get("current_step", 0))

    @property
    def is_workflow(self) -> bool:
        """A traced workflow (its own runner; its trace.md is its source of truth)."""
        return self.template_id.startswith("workflow:")

    @property
    def last_activity(self) -> str:
        """When the task last moved: a phase transition or a step's result."""
        step_at = (self.execute_progress or {}).get("last_step_at")
        return max(self.updated_at, str(step_at)) if step_at else self.updated_at

    @property
    def input_text(self) -> str:
        return str((self.trigger_event or {}).get("text", ""))


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One `task_steps` row: a plan step's journey from started to its result."""

    task_id: str
    step: int
    tool: str
    semantics: Semantics
    idempotency: Idempotency
    status: StepStatus
    args: dict[str, JSON]
    result: JSON
    label: str
    started_at: str
    completed_at: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class CompletedStep:
    """The spec's `CompletedStep`: a step whose result is durable."""

    step: int
    tool: str
    action_semantics: Semantics
    result_json: JSON
    label: str
    completed_at: str

    @classmethod
    def from_record(cls, rec: StepRecord) -> CompletedStep:
        return cls(
            step=rec.step,
            tool=rec.tool,
            action_semantics=rec.semantics,
            result_json=rec.result,
            label=rec.label,
            completed_at=rec.completed_at or rec.started_at,
        )


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One `pending_approvals` row: a question to the owner that a task waits on."""

    approval_id: str
    task_id: str
    action_type: str
    description: str
    data_preview: str | None
    taint_level: str | None
    target_sink: str | None
    tool: str | None
    step: int | None
    created_at: str
    expires_at: str
    status: ApprovalStatus
    options: list[str]
    decision: str | None
    decided_at: str | None
    prompts_sent: int
    # sha256 of the canonical JSON of the arguments the owner was shown: an approval
    # lets exactly those run (see args_digest)
    args_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class CredentialPromptRecord:
    """One `pending_credentials` row. Holds where the secret goes, never the secret."""

    prompt_id: str
    task_id: str
    service: str
    credential_type: str
    instructions: str
    vault_ref: str
    message_id: str | None
    created_at: str
    expires_at: str
    status: CredentialStatus
    step: int | None
    received_at: str | None


@dataclass(frozen=True, slots=True)
class OwnerMessage:
    """A message to the owner, keyed so that a resend after a crash is a no-op."""

    message_key: str
    kind: str  # "report", "approval", "credential", "result", "notice"
    body: str
    task_id: str | None = None
    sink: str = "owner"


def args_digest(args: Any) -> str:
    """The sha256 of a tool call's arguments as canonical JSON: what an approval binds."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
