"""The store protocol: pfar's durable state as seven families of async verbs.

A kernel, its runners, recovery and the operator API see the journal only through
these protocols. `Journal` implements them over SQLite or PostgreSQL, and both pass
the same contract suite (tests/contract).

Every write returns only once its transaction is committed, and refuses a move the
state machine does not allow, changing nothing. Every read is async as well: a
networked store awaits its I/O where SQLite reads a local page.

A verb may touch rows of several families in one transaction (parking a task on an
approval inserts the question, moves the task and queues the prompt): a family is
where a verb is found, not a transaction boundary.

Many kernels (DESIGN.md "Many kernels"). A store is opened by one kernel and is
bound to it: `TaskStore.claim_unfinished` is how a kernel takes the unfinished tasks
it will recover and run. On a shared store that claim records a lease (this kernel,
an expiry, a new epoch) with `FOR UPDATE SKIP LOCKED`, and the store fences each
later write for a claimed task with the epoch it holds. None of that reaches the
callers: they claim, then write as they do today. On SQLite one kernel owns a home
(its lock file refuses a second), so the claim is the kernel's whole home.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ..answers import Answer
from . import payloads
from .boot_reports import KeptBoot
from .bus_sql import BusEvent, BusEventKind
from .channels_sql import Delivery, OutboxState
from .group_commit import StoreWriter
from .json_text import JsonObject
from .locks_sql import Alive, HeldLock, LockClaim, LockOwner
from .message_keys import MessageKey, MessageKind
from .payloads import Executing, Payload
from .records import (
    ApprovalRecord,
    CredentialPromptRecord,
    InboundEvent,
    Move,
    OwnerMessage,
    StepRecord,
    TaskRecord,
)
from .rows import (
    KernelBoot,
    TaskMessage,
)
from .sessions.record import KEEP, Keep, SessionRecord
from .sessions.status import SessionStatus
from .states import TaskState
from .task_protocol import TaskStore
from .turns import LoopSettings, PermissionRule, StoredTurn, Turn


class QuestionStore(Protocol):
    """The owner's questions: approvals and credential prompts."""

    async def approval(self, approval_id: str) -> ApprovalRecord: ...
    async def approvals(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[ApprovalRecord]: ...
    async def approvals_for_task(self, task_id: str) -> list[ApprovalRecord]: ...
    async def resolve_approval_id(self, prefix: str) -> str: ...
    async def credential_prompt(self, prompt_id: str) -> CredentialPromptRecord: ...
    async def credential_prompts(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[CredentialPromptRecord]: ...
    async def credential_prompts_for_task(self, task_id: str) -> list[CredentialPromptRecord]: ...
    async def resolve_prompt_id(self, prefix: str) -> str: ...
    async def next_deadline(self) -> str | None: ...

    # message None: no prompt of its own (one the owner was sent already covers it)
    async def park_approval(
        self,
        approval: ApprovalRecord,
        message: OwnerMessage | None,
        parked: payloads.AwaitingApproval,
    ) -> None: ...
    async def park_credential(
        self, prompt: CredentialPromptRecord, message: OwnerMessage
    ) -> None: ...
    async def decide_approval(
        self,
        approval_id: str,
        answer: Answer,
        *,
        resume_to: Callable[[TaskRecord, ApprovalRecord, Answer], Move],
        by: str,
    ) -> tuple[ApprovalRecord, bool]: ...
    async def receive_credential(
        self, prompt_id: str, by: str
    ) -> tuple[CredentialPromptRecord, bool]: ...
    async def expire_due(self, now: str) -> list[tuple[str, str | None]]: ...
    async def supersede_old_prompts(self) -> int: ...


class EventStore(Protocol):
    """The owner's outbox and the kernel's boots (inbound events are taken with the
    task they create: `TaskStore.create`)."""

    async def enqueue(self, messages: Sequence[OwnerMessage], point: str | None = None) -> None: ...
    async def pending(self) -> list[OwnerMessage]: ...
    async def for_task(self, task_id: str) -> list[TaskMessage]: ...
    def mark_delivered(self, keys: Sequence[MessageKey]) -> None:
        """Rides on the next commit: a crash before it only means a resend the
        delivery keys absorb."""

    async def start_boot(self, boot_id: str, pid: int, version: str) -> None: ...
    async def end_boot(self, boot_id: str) -> None: ...
    async def last_boot(self) -> KernelBoot | None: ...
    # the newest `limit` boots, newest first, each with its recovery report (None: a boot
    # from before reports were kept; UnreadableReport: one this pfar cannot read)
    async def boots(self, limit: int = 20) -> list[KeptBoot]: ...
    async def prune(self, before: str, keep_boots: int, batch: int = 500) -> int: ...
    # the event bus (bus_sql.py): task events in commit order, and each subscriber's offset
    async def bus(self, after: int, limit: int = 100) -> list[BusEvent]: ...
    async def bus_for_task(
        self, task_id: str, kinds: frozenset[BusEventKind]
    ) -> list[BusEvent]: ...
    async def bus_offset(self, subscriber: str) -> int | None: ...
    async def bus_last(self) -> int: ...
    # the number of the last event ever appended, pruned or not: the journal's position
    async def bus_high_water(self) -> int: ...
    async def bus_ack(self, subscriber: str, seq: int, *, point: str | None = ...) -> None: ...
    # `body`: a JSON object
    async def publish(
        self, kind: BusEventKind, task_id: str | None, body: Mapping[str, object]
    ) -> None: ...


class AdapterStore(Protocol):
    """Each adapter's position and settings (a Telegram offset, a Slack cursor)."""

    async def get(self, adapter: str) -> JsonObject | None: ...
    # `state`: a JSON object, read back by `get`
    async def put(self, adapter: str, state: Mapping[str, object]) -> None: ...
    async def ingested(
        self, adapter: str, state: Mapping[str, object], event_ids: Sequence[str]
    ) -> None: ...
    async def seen(self, event_id: str) -> bool: ...
    # each owner message, delivered once per chat channel (channels_sql.py)
    async def register_channels(self, names: Sequence[str]) -> int: ...
    async def due(self, channel: str, limit: int = 20) -> list[Delivery]: ...
    async def next_due_at(self, channel: str) -> str | None: ...
    async def sending(self, channel: str, key: MessageKey) -> None: ...
    async def sent(self, channel: str, key: MessageKey, remote_id: str | None) -> None: ...
    async def later(self, channel: str, key: MessageKey, error: str, not_before: str) -> None: ...
    async def failed(self, channel: str, key: MessageKey, error: str) -> None: ...
    async def in_doubt(self, channel: str, key: MessageKey, error: str) -> None: ...
    async def queue_for(self, channel: str, msg: OwnerMessage) -> bool: ...
    async def event_task(self, event_id: str) -> str | None: ...
    async def queued(self, key_prefix: str) -> bool: ...
    async def outbox_state(self, channel: str) -> OutboxState: ...
    async def sent_ids(self, channel: str, key_prefix: str) -> list[tuple[MessageKey, str]]: ...
    async def replied_to(
        self, channel: str, remote_id: str
    ) -> tuple[MessageKey, str | None, MessageKind] | None: ...
    async def delivery_counts(self, channel: str) -> dict[str, int]: ...


class SessionStore(Protocol):
    """Long-lived agent sessions bound to a chat thread."""

    async def get(self, session_id: str) -> SessionRecord: ...
    async def resolve_id(self, session_id: str) -> str: ...
    async def list(self, status: SessionStatus | None = None) -> list[SessionRecord]: ...
    async def live_for_thread(self, thread_id: str) -> SessionRecord | None: ...
    async def create(self, project_path: str, thread_id: str) -> SessionRecord: ...
    # the checked move (sessions/status.py); `process` is kept only while ACTIVE
    async def transition(
        self,
        session_id: str,
        from_status: SessionStatus,
        to_status: SessionStatus,
        *,
        context: Mapping[str, object] | None = None,
        process: JsonObject | Keep | None = KEEP,
    ) -> SessionRecord: ...

    # the database, as an error names it
    @property
    def path(self) -> str: ...


class LoopStore(Protocol):
    """Loop tasks: their settings, their conversations (appended turns), and the owner's
    standing permission answers."""

    async def settings(self, task_id: str) -> LoopSettings: ...
    async def turns(self, task_id: str, after: int = -1) -> list[StoredTurn]: ...
    async def turn_count(self, task_id: str) -> int: ...
    async def children(self, task_id: str) -> list[str]: ...
    async def rules(self) -> list[PermissionRule]: ...
    async def anomalies(self, task_id: str, step: int) -> list[tuple[str, str]]: ...
    async def host_first_seen(self, host: str) -> tuple[str, int] | None: ...
    async def writes_since(self, task_id: str, since: str) -> int: ...

    async def create(
        self,
        task: TaskRecord,
        settings: LoopSettings,
        prompt: str,
        event: InboundEvent | None = None,
        messages: Sequence[OwnerMessage] = (),
    ) -> tuple[TaskRecord, bool]: ...
    async def spawn(
        self,
        call: StepRecord,
        child: TaskRecord,
        settings: LoopSettings,
        prompt: str,
        event: InboundEvent,
    ) -> TaskRecord: ...
    async def unblock(self, call: StepRecord) -> TaskState: ...
    async def update_settings(
        self, task_id: str, settings: LoopSettings, messages: Sequence[OwnerMessage] = ()
    ) -> None: ...
    async def append(
        self,
        task_id: str,
        turns: Sequence[Turn],
        *,
        after: int,
        to: Payload | None = None,
        point: str | tuple[str, ...] | None,
        messages: Sequence[OwnerMessage] = (),
        at_pause: Executing | None = None,
    ) -> tuple[list[StoredTurn], TaskState | None]: ...
    async def send(
        self,
        task_id: str,
        text: str,
        *,
        done: bool = False,
        event: tuple[str, str] | None = None,
    ) -> TaskState: ...
    async def record_anomalies(
        self,
        task_id: str,
        step: int,
        found: Sequence[tuple[str, str]],
        host: str | None,
        messages: Sequence[OwnerMessage] = (),
    ) -> None: ...
    async def retry(self, task_id: str, *, by: str | None = None) -> TaskState: ...
    async def forget_rule(self, tool: str, pattern: str) -> bool: ...


class LockStore(Protocol):
    """Resource locks held by tool calls (locks_sql.py), each with its holder process and
    a lease: shared by every kernel on one journal."""

    async def acquire(
        self,
        claims: Sequence[LockClaim],
        holder: str,
        task_id: str,
        owner: LockOwner,
        lease_seconds: float,
        alive: Alive,
    ) -> tuple[HeldLock | None, int]: ...
    def release(self, holder: str) -> None:
        """Rides on the next commit (a lock left by a crash has a holder that is gone)."""

    async def renew(self, boot_id: str, lease_seconds: float) -> int: ...
    async def clear_stale(self, owner: LockOwner, alive: Alive) -> int: ...
    async def held(self) -> list[HeldLock]: ...
    # calls waiting for a lock, as listings show them (display only; ride on commits)
    def waiting(self, holder: str, task_id: str, boot_id: str, reason: str) -> None: ...
    def waited(self, holder: str) -> None: ...
    async def waits(self) -> dict[str, str]: ...


class Store(Protocol):
    """One journal: its seven families, its writer, where it is, and closing it."""

    @property
    def tasks(self) -> TaskStore: ...
    @property
    def questions(self) -> QuestionStore: ...
    @property
    def events(self) -> EventStore: ...
    @property
    def adapters(self) -> AdapterStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def loops(self) -> LoopStore: ...
    @property
    def locks(self) -> LockStore: ...

    @property
    def writer(self) -> StoreWriter: ...
    # the SQLite file the journal is, None for a journal on a server
    @property
    def path(self) -> Path | None: ...
    # the database, as a message names it (a file, or a server without password)
    @property
    def where(self) -> str: ...
    # closes a SQLite journal (a server's is closed with `aclose`, on its loop)
    def close(self, *, checkpoint: bool = True) -> None: ...
    # commits what is queued and closes, on any backend
    async def aclose(self, *, checkpoint: bool = True) -> None: ...
