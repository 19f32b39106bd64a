"""Typed records of the journal: what a row holds, as plain data (JSON in, JSON out).

Tasks and their steps are here; the questions and messages to the owner are in
`owner_records`, the JSON text and the timestamps every column goes through in
`json_text` and `timestamps` (imported from here too).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..errors import MalformedTaskRow
from .json_text import JSON, ORJSON_OPTIONS, dumps, loads
from .owner_records import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    OwnerMessage,
    args_digest,
)
from .payloads import Payload, Queued, Working, state_of, step_of
from .states import TaskState
from .timestamps import now_rfc3339, parse_rfc3339, rfc3339
from .turns import PermissionRule

__all__ = [
    "JSON",
    "ORJSON_OPTIONS",
    "ApprovalRecord",
    "ApprovalStatus",
    "CompletedStep",
    "CredentialPromptRecord",
    "CredentialStatus",
    "Idempotency",
    "InboundEvent",
    "Move",
    "OwnerMessage",
    "Semantics",
    "StepRecord",
    "StepStatus",
    "TaskKind",
    "TaskRecord",
    "TaskUpdate",
    "UnreadableTask",
    "args_digest",
    "dumps",
    "loads",
    "now_rfc3339",
    "parse_rfc3339",
    "rfc3339",
]


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


class TaskKind(StrEnum):
    """Which runner advances a task: each owns its states' meaning, its recovery decision
    and how it applies the owner's answers (runners/registry.py)."""

    pipeline = "pipeline"  # a template's extract, plan, execute, synthesize
    workflow = "workflow"  # a traced workflow: its trace.md is its source of truth
    loop = "loop"  # an open-ended agent: a conversation with tool calls (runners/loop)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One `task_journal` row."""

    task_id: str
    template_id: str
    principal: str
    trigger_event: dict[str, JSON] | None
    state: TaskState
    # the state's own record (payloads.py); its kind is `state`
    payload: Payload
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
    kind: TaskKind = TaskKind.pipeline

    @classmethod
    def new(
        cls,
        kind: TaskKind,
        template_id: str,
        event: InboundEvent,
        payload: Payload,
        *,
        data_ceiling: str,
        output_sinks: list[str],
        template_hash: str,
        plan: dict[str, JSON] | None = None,
        execute_progress: dict[str, JSON] | None = None,
        extracted_metadata: dict[str, JSON] | None = None,
    ) -> TaskRecord:
        """A task not yet journaled, started by `event`, entering `payload`'s state."""
        now = now_rfc3339()
        state = state_of(payload)
        return cls(
            task_id=str(uuid.uuid4()),
            template_id=template_id,
            principal=event.principal,
            trigger_event=event.to_json(),
            state=state,
            payload=payload,
            phase=state.phase,
            plan=plan,
            execute_progress=execute_progress,
            extracted_metadata=extracted_metadata,
            data_ceiling=data_ceiling,
            output_sinks=output_sinks,
            trace_id=uuid.uuid4().hex,
            created_at=now,
            updated_at=now,
            error=None,
            event_id=event.event_id,
            template_hash=template_hash,
            recovery_attempts=0,
            kind=kind,
        )

    def queued(self, priority: int) -> TaskRecord:
        """This new task created straight into the queue (no slot was free): journaled
        Queued from its first commit, so it is never said to have started before its
        TaskScheduled (kernel/admission.py)."""
        if not isinstance(self.payload, Working):
            return self  # only a working task waits for a slot
        payload = Queued(then=self.payload, priority=priority)
        return replace(self, state=TaskState.Queued, payload=payload, phase=TaskState.Queued.phase)

    @property
    def current_step(self) -> int:
        """The plan step it is at; past its steps (synthesizing, ended), the step its
        progress last recorded."""
        step = step_of(self.payload)
        if step is not None:
            return step
        progress = (self.execute_progress or {}).get("current_step")
        return progress if isinstance(progress, int) else 0

    @property
    def plan_steps(self) -> list[dict[str, JSON]]:
        """The journaled plan's steps ([] before there is a plan)."""
        return list((self.plan or {}).get("steps", []))

    @property
    def last_activity(self) -> str:
        """When the task last moved: a phase transition or a step's result."""
        step_at = (self.execute_progress or {}).get("last_step_at")
        return max(self.updated_at, str(step_at)) if step_at else self.updated_at

    @property
    def input_text(self) -> str:
        return str((self.trigger_event or {}).get("text", ""))


@dataclass(frozen=True, slots=True)
class UnreadableTask:
    """A task row a listing found but could not read as a task (a hand edit, a bug): listed
    with what the row says plainly, and why it is unreadable, never skipped or guessed at."""

    task_id: str
    template_id: str
    state: str
    phase: str
    created_at: str
    updated_at: str
    field: str  # where in the row, e.g. "state_detail.then.current_step"
    problem: str  # what is wrong there

    @property
    def error(self) -> str:
        """What is wrong, as a sentence the owner can act on."""
        return str(MalformedTaskRow(self.task_id, self.field, self.problem))


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
class TaskUpdate:
    """Columns a transition sets besides the state (None: left as they are)."""

    plan: dict[str, JSON] | None = None
    execute_progress: dict[str, JSON] | None = None
    extracted_metadata: dict[str, JSON] | None = None
    template_hash: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """Where something sends a task: the state it enters (as its payload) and what else
    its row gets. What an owner's answer and a recovery decision return."""

    to: Payload
    update: TaskUpdate = TaskUpdate()
    # an owner's "always allow" / "never allow": kept in the same commit as the answer
    remember: PermissionRule | None = None
