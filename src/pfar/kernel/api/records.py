"""What the operator API's verbs return: frozen records, carried across the control
socket (and printed by `pfar ... --json`) in the one schema their type gives (wire.py).

The owner's questions and sessions are the API's own views of their rows (views.py);
the kernel's own records (HoldResult, KernelStatistics) are returned as they are; a
step is shown as a StepView, without the arguments it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from ...journal import (
    ApprovalStatus,
    StepRecord,
    TaskRecord,
    TaskState,
)
from ...journal.boot_reports import Kept, KeptBoot
from ...journal.bus_sql import BusEvent, BusEventKind
from ...journal.json_text import JsonValue
from ...journal.payloads import Failed
from ...journal.records import UnreadableTask
from ...runners.loop.context import ContextStats
from ..holds import HoldResult
from .timeline_entries import TimelineEntry
from .views import ApprovalView, CredentialPromptView


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
    # what its model calls cost in US dollars, and their tokens (None: not read for
    # this view; a page of tasks and a timeline read them)
    cost_usd: float | None = None
    tokens: int | None = None
    # how many of those calls had no price: their cost is unknown, not in `cost_usd`
    unpriced_calls: int | None = None
    # a Failed task whose failure is recoverable: `retry` continues it
    retryable: bool = False

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
            retryable=isinstance(t.payload, Failed) and t.payload.recoverable,
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


@dataclass(frozen=True, slots=True)
class TaskListing:
    """A page of the task list, newest first by creation; `next_cursor` is the next
    page's `cursor` (None: this page ends the list)."""

    tasks: tuple[TaskSummary, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class StepView:
    """A step as the owner is shown it (its arguments stay in the journal)."""

    step: int  # 0-based
    tool: str
    semantics: str
    idempotency: str
    status: str
    started_at: str | None
    completed_at: str | None
    error: str | None
    result: JsonValue

    @classmethod
    def of(cls, s: StepRecord) -> StepView:
        return cls(
            s.step,
            s.tool,
            s.semantics.value,
            s.idempotency.value,
            s.status.value,
            s.started_at,
            s.completed_at,
            s.error,
            s.result,
        )


@dataclass(frozen=True, slots=True)
class TaskTimeline:
    """A task's whole story from the journal: its summary, plan, steps and, in time
    order, everything that happened to it (`timeline` on the wire)."""

    task: TaskSummary
    plan: dict[str, JsonValue] | None
    extracted_metadata: dict[str, JsonValue] | None
    steps: tuple[StepView, ...]
    entries: Annotated[tuple[TimelineEntry, ...], Field(alias="timeline")]
    input: str | None = None  # what the task was started with
    answer: str | None = None  # what it said back (answer.py)


@dataclass(frozen=True, slots=True)
class Questions:
    """What the owner is (or was) asked: approvals and credential prompts."""

    approvals: tuple[ApprovalView, ...]
    credentials: tuple[CredentialPromptView, ...]


@dataclass(frozen=True, slots=True)
class Submitted:
    """A submitted task; `redacted` names the secrets its text held (stored as markers)."""

    task_id: str
    template_id: str
    state: TaskState
    redacted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TaskRef:
    """The task a verb started or moved, and its state right after."""

    task_id: str
    state: TaskState

    @classmethod
    def of(cls, t: TaskRecord) -> TaskRef:
        return cls(t.task_id, t.state)


@dataclass(frozen=True, slots=True)
class Sent:
    """The owner's message to a loop task, taken: the task's state right after, and for a
    command (`/pause`, `/cancel`, `/resume`) what it did (`hold`)."""

    task_id: str
    state: TaskState
    command: str | None = None
    hold: HoldResult | None = None
    context: ContextStats | None = None  # `/context`


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


@dataclass(frozen=True, slots=True)
class SecretStored:
    name: str


@dataclass(frozen=True, slots=True)
class Pong:
    """The kernel answers: which boot of it, in which process."""

    boot_id: str
    pid: int


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
    position: dict[str, JsonValue] | None
    deliveries: dict[str, int]
    # the first message waiting: why its last send failed, and when it is tried again
    send_error: str | None = None
    next_try: str | None = None


@dataclass(frozen=True, slots=True)
class EventOffset:
    """A bus subscriber's offset: it has handled every event up to `seq`."""

    subscriber: str
    seq: int


@dataclass(frozen=True, slots=True)
class BusEventView:
    """One event of the bus as a live view is given it (`Operator.subscribe`): its
    number in commit order, its kind (TaskCreated, TaskCompleted, ...), the task it is
    about (None for an event of no task), what it says, and when it was committed."""

    seq: int
    kind: BusEventKind
    task_id: str | None
    body: dict[str, JsonValue]
    at: str

    @classmethod
    def of(cls, event: BusEvent) -> BusEventView:
        return cls(event.seq, event.kind, event.task_id, dict(event.body), event.at)


@dataclass(frozen=True, slots=True)
class RecoveryView:
    """The running kernel's start: its boot, the owner's recovery report as it was sent,
    and the tasks the report is about (each line's tasks, linked by a console)."""

    boot_id: str
    text: str
    tasks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BootRecovery:
    """A kernel's start and its recovery report (`Operator.recoveries`): when it started
    and ended, whether it ended by stopping (`clean`), whether it is the kernel running
    now, how the run before it ended (`after`: "clean", "killed", or None when no
    earlier boot is kept), and the report as the owner was sent it, each line with its
    tasks (None for a boot from before reports were kept; an UnreadableReport for one
    this pfar cannot read)."""

    boot_id: str
    started_at: str
    ended_at: str | None
    clean: bool
    running: bool
    after: Literal["clean", "killed"] | None
    report: Kept | None

    @classmethod
    def of(cls, boot: KeptBoot, before: KeptBoot | None, running: bool) -> BootRecovery:
        after: Literal["clean", "killed"] | None = None
        if before is not None:
            after = "clean" if before.clean else "killed"
        return cls(
            boot.boot_id, boot.started_at, boot.ended_at, boot.clean, running, after, boot.report
        )
