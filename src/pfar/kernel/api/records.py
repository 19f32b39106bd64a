"""What the operator API's verbs return: frozen records, each with the `to_json` that
carries it across the control socket (the same keys `pfar ... --json` prints).

Records the journal already has (ApprovalRecord, CredentialPromptRecord, SessionRecord)
and the kernel's own (HoldResult, KernelStatistics) are returned as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...journal import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    StepRecord,
    TaskRecord,
    TaskState,
)
from ...journal.bus_sql import BusEvent
from ...journal.records import UnreadableTask

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """A task as a listing shows it: where it stands, not everything it holds."""

    task_id: str
    template_id: str
    # a str only for a row whose state column is no state (see UnreadableTask)
    state: TaskState | str
    phase: str
    current_step: int | None  # 0-based; None while the task has no plan
    steps: int | None  # how many steps its plan has; None while it has none
    created_at: str
    updated_at: str
    error: str | None
    # what a working task's tool call waits for (a resource lock another task holds)
    waiting_for: str | None = None

    @classmethod
    def of(cls, t: TaskRecord | UnreadableTask) -> TaskSummary:
        if isinstance(t, UnreadableTask):
            return cls.unreadable(t)
        steps = len(t.plan_steps) if t.plan else None
        return cls(
            task_id=t.task_id,
            template_id=t.template_id,
            state=t.state,
            phase=t.phase,
            current_step=t.current_step if t.plan else None,
            steps=steps,
            created_at=t.created_at,
            updated_at=t.updated_at,
            error=t.error,
        )

    @classmethod
    def unreadable(cls, u: UnreadableTask) -> TaskSummary:
        try:
            state: TaskState | str = TaskState(u.state)
        except ValueError:
            state = u.state
        return cls(
            task_id=u.task_id,
            template_id=u.template_id,
            state=state,
            phase=u.phase,
            current_step=None,
            steps=None,
            created_at=u.created_at,
            updated_at=u.updated_at,
            error=u.error,
        )

    def to_json(self) -> JSON:
        return {
            "task_id": self.task_id,
            "template_id": self.template_id,
            "state": str(self.state),
            "phase": self.phase,
            "current_step": self.current_step,
            "steps": self.steps,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "error": self.error,
            "waiting_for": self.waiting_for,
        }


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One moment of a task's story: when, and what happened, in the owner's words."""

    at: str
    event: str

    def to_json(self) -> JSON:
        return {"at": self.at, "event": self.event}


@dataclass(frozen=True, slots=True)
class TaskTimeline:
    """A task's whole story from the journal: its summary, plan, steps and, in time
    order, everything that happened to it."""

    task: TaskSummary
    plan: dict[str, Any] | None
    extracted_metadata: dict[str, Any] | None
    steps: tuple[StepRecord, ...]
    entries: tuple[TimelineEntry, ...]
    input: str | None = None  # what the task was started with
    answer: str | None = None  # what it said back (answer.py)

    def to_json(self) -> JSON:
        return {
            "task": self.task.to_json(),
            "input": self.input,
            "answer": self.answer,
            "plan": self.plan,
            "extracted_metadata": self.extracted_metadata,
            "steps": [_step_json(s) for s in self.steps],
            "timeline": [e.to_json() for e in self.entries],
        }


def _step_json(s: StepRecord) -> JSON:
    return {
        "step": s.step,
        "tool": s.tool,
        "semantics": s.semantics.value,
        "idempotency": s.idempotency.value,
        "status": s.status.value,
        "started_at": s.started_at,
        "completed_at": s.completed_at,
        "error": s.error,
        "result": s.result,
    }


@dataclass(frozen=True, slots=True)
class Questions:
    """What the owner is (or was) asked: approvals and credential prompts."""

    approvals: tuple[ApprovalRecord, ...]
    credentials: tuple[CredentialPromptRecord, ...]

    def to_json(self) -> JSON:
        return {
            "approvals": [a.to_json() for a in self.approvals],
            "credentials": [p.to_json() for p in self.credentials],
        }


@dataclass(frozen=True, slots=True)
class Submitted:
    """A submitted task; `redacted` names the secrets its text held (stored as markers)."""

    task_id: str
    template_id: str
    state: TaskState
    redacted: tuple[str, ...]

    def to_json(self) -> JSON:
        return {
            "task_id": self.task_id,
            "template_id": self.template_id,
            "state": self.state.value,
            "redacted": list(self.redacted),
        }


@dataclass(frozen=True, slots=True)
class TaskRef:
    """The task a verb started or moved, and its state right after."""

    task_id: str
    state: TaskState

    @classmethod
    def of(cls, t: TaskRecord) -> TaskRef:
        return cls(t.task_id, t.state)

    def to_json(self) -> JSON:
        return {"task_id": self.task_id, "state": self.state.value}


@dataclass(frozen=True, slots=True)
class Sent:
    """The owner's message to a loop task, taken: the task's state right after, and for a
    command (`/pause`, `/cancel`, `/resume`) what it did (`hold`, as `HoldResult.to_json`)."""

    task_id: str
    state: TaskState
    command: str | None = None
    hold: JSON | None = None
    context: JSON | None = None  # `/context`: ContextStats.to_json

    def to_json(self) -> JSON:
        out: JSON = {"task_id": self.task_id, "state": self.state.value}
        if self.command is not None:
            out["command"] = self.command
        if self.hold is not None:
            out["hold"] = self.hold
        if self.context is not None:
            out["context"] = self.context
        return out


@dataclass(frozen=True, slots=True)
class Answered:
    """An approval once answered; `changed` is False when it had been decided before."""

    approval_id: str
    status: ApprovalStatus
    decision: str | None
    changed: bool
    task_id: str
    # the task's state and error right after the answer: what the answer did to it
    # (a denied step may fail the task, not resume it)
    task_state: str = ""
    task_error: str | None = None

    def to_json(self) -> JSON:
        return {
            "approval_id": self.approval_id,
            "status": self.status.value,
            "decision": self.decision,
            "changed": self.changed,
            "task_id": self.task_id,
            "task_state": self.task_state,
            "task_error": self.task_error,
        }


@dataclass(frozen=True, slots=True)
class SecretStored:
    name: str

    def to_json(self) -> JSON:
        return {"name": self.name}


@dataclass(frozen=True, slots=True)
class Pong:
    """The kernel answers: which boot of it, in which process."""

    boot_id: str
    pid: int

    def to_json(self) -> JSON:
        return {"boot_id": self.boot_id, "pid": self.pid}


@dataclass(slots=True)
class ChannelState:
    """A chat channel's connection, as its supervisor last said (`pfar channels`)."""

    name: str
    state: str  # starting | connected | retrying | degraded | stopped
    last_error: str | None = None
    since: str | None = None  # when it entered this state
    failures: int = 0  # failed starts in a row


@dataclass(frozen=True, slots=True)
class ChannelView:
    """One channel for the owner: its state, its position, its deliveries by status."""

    name: str
    state: str
    last_error: str | None
    since: str | None
    failures: int
    position: dict[str, Any] | None
    deliveries: dict[str, int]
    # the first message waiting: why its last send failed, and when it is tried again
    send_error: str | None = None
    next_try: str | None = None

    def to_json(self) -> JSON:
        return {
            "name": self.name,
            "state": self.state,
            "last_error": self.last_error,
            "since": self.since,
            "failures": self.failures,
            "position": self.position,
            "deliveries": self.deliveries,
            "send_error": self.send_error,
            "next_try": self.next_try,
        }


@dataclass(frozen=True, slots=True)
class EventOffset:
    """A bus subscriber's offset: it has handled every event up to `seq`."""

    subscriber: str
    seq: int

    def to_json(self) -> JSON:
        return {"subscriber": self.subscriber, "seq": self.seq}


@dataclass(frozen=True, slots=True)
class BusEventView:
    """One event of the bus as a live view is given it (`Operator.subscribe`): its
    number in commit order, its kind (TaskCreated, TaskCompleted, ...), the task it is
    about (None for an event of no task), what it says, and when it was committed."""

    seq: int
    kind: str
    task_id: str | None
    body: JSON
    at: str

    @classmethod
    def of(cls, event: BusEvent) -> BusEventView:
        return cls(event.seq, event.kind, event.task_id, dict(event.body), event.at)

    def to_json(self) -> JSON:
        # the same keys `pfar events --json` prints
        return {
            "seq": self.seq,
            "kind": self.kind,
            "task_id": self.task_id,
            **self.body,
            "at": self.at,
        }
