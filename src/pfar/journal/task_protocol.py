"""The tasks family of the store protocol (store.py): tasks, their steps, their model
calls, and the reads of them a console and recovery make."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Protocol

from . import holds, payloads
from .activity_sql import StoredActivity
from .boot_reports import StoredReport
from .costs_sql import CostsBy, Spent, StoredCosts
from .json_text import JsonObject, JsonValue
from .payloads import Payload
from .records import (
    ApprovalRecord,
    InboundEvent,
    OwnerMessage,
    StepRecord,
    TaskRecord,
    TaskUpdate,
    UnreadableTask,
)
from .rows import (
    DecidedLearning,
    LlmCall,
    LlmCallMade,
    LlmUsage,
    StepProcess,
)
from .states import TaskState
from .task_pages import TaskCursor, TaskFilter, TaskPage


class TaskStore(Protocol):
    """Tasks, their steps and their model calls."""

    # reads
    async def get(self, task_id: str) -> TaskRecord: ...
    # the state and its payload alone (no plan, no progress decoded)
    async def payload(self, task_id: str) -> Payload: ...
    async def resolve_id(self, prefix: str) -> str: ...
    async def listing(
        self, states: Sequence[str] | None = None, limit: int = 50
    ) -> list[TaskRecord | UnreadableTask]: ...
    # the task list a page at a time, newest first by creation (task_pages.py)
    async def page(
        self, wanted: TaskFilter, after: TaskCursor | None = None, limit: int = 50
    ) -> TaskPage: ...
    async def latest_workflow_task(self, directory: str) -> str | None: ...
    async def counts(self) -> dict[str, int]: ...
    async def unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]: ...
    async def claim_unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]: ...
    async def steps(self, task_id: str) -> list[StepRecord]: ...
    # each step's result, in order (what a synthesis reads): steps() without the rest
    async def step_results(self, task_id: str) -> list[JsonValue]: ...
    async def step(self, task_id: str, step: int) -> StepRecord | None: ...
    async def steps_in_flight(self) -> dict[str, StepRecord]: ...
    async def started_processes(
        self, task_id: str | None = None
    ) -> list[tuple[str, int, StepProcess]]: ...
    async def llm_usage(self, task_id: str) -> LlmUsage: ...
    # per day over [since, until): tasks created, steps started, model calls (activity_sql.py)
    async def activity(self, since: date, until: date) -> StoredActivity: ...
    async def llm_calls(self, task_id: str) -> list[LlmCallMade]: ...  # in order made
    # spending (costs_sql.py): calls summed by day, model, template or task over
    # [since, until) (days; None: unbounded), and what a task or a window spent
    async def costs(self, by: CostsBy, since: str | None, until: str | None) -> StoredCosts: ...
    async def spent_by_task(self, task_id: str) -> Spent: ...
    async def spent_by_tasks(self, task_ids: Sequence[str]) -> dict[str, Spent]: ...
    async def spent_between(self, since: str, until: str) -> Spent: ...
    # hooks' verdicts kept with the task (hooks_sql.py): replayed, never asked again
    async def hook_verdict(self, task_id: str, key: str) -> JsonObject | None: ...

    # writes
    async def create(
        self, task: TaskRecord, event: InboundEvent | None = None
    ) -> tuple[TaskRecord, bool]: ...
    async def transition(
        self,
        task_id: str,
        to: Payload,
        *,
        point: str | None,
        update: TaskUpdate = ...,
        messages: Sequence[OwnerMessage] = (),
        reset_attempts: bool = True,
    ) -> TaskState: ...
    async def fail(
        self,
        task_id: str,
        error: str,
        messages: Sequence[OwnerMessage] = (),
        *,
        recoverable: bool = False,
    ) -> None: ...
    async def step_started(self, rec: StepRecord) -> None: ...
    async def step_process(self, task_id: str, step: int, process: StepProcess) -> None: ...
    async def step_finished(
        self, rec: StepRecord, *, next_step: int, last: bool = False
    ) -> TaskState: ...
    async def step_failed(
        self,
        rec: StepRecord,
        error: str,
        messages: Sequence[OwnerMessage] = (),
        *,
        recoverable: bool = False,
    ) -> None: ...
    async def llm_request_sent(self, task_id: str, phase: str) -> None: ...
    async def record_hook_verdict(
        self,
        task_id: str,
        key: str,
        verdict: JsonObject,
        messages: Sequence[OwnerMessage] = (),
    ) -> JsonObject: ...
    async def learnings_decided(
        self, task_id: str, learnings: Sequence[DecidedLearning]
    ) -> list[DecidedLearning]: ...
    # `events`: the bodies of the LearningExtracted events (JSON objects)
    async def learnings_kept(
        self, task_id: str, events: Sequence[Mapping[str, object]]
    ) -> bool: ...
    def record_llm_call(self, call: LlmCall) -> None:
        """Accounting, not state: rides on the next commit; nobody waits for it."""

    async def request_pause(
        self, task_id: str, *, running: Callable[[], bool], by: str | None = None
    ) -> tuple[TaskState, holds.PauseOutcome]: ...
    async def unpause(
        self, task_id: str, *, by: str | None = None
    ) -> tuple[TaskState, holds.ResumeOutcome]: ...
    async def retry(self, task_id: str, *, by: str | None = None) -> TaskState: ...
    async def begin_cancel(self, task_id: str, *, by: str | None = None) -> holds.CancelIntent: ...
    async def finish_cancel(self, task_id: str, message: OwnerMessage) -> list[int] | None: ...
    async def apply_recovery(
        self,
        *,
        abandon: Sequence[tuple[str, str]],
        attempted: Sequence[str],
        messages: Sequence[OwnerMessage],
        park: Sequence[tuple[ApprovalRecord, payloads.AwaitingApproval]] = (),
        pause: Sequence[str] = (),
        cancel: Sequence[str] = (),
        report: tuple[str, StoredReport] | None = None,
        recovered: Sequence[tuple[str, str, str]] = (),
    ) -> None: ...
    async def cleanup(self, completed_before: str, failed_before: str, batch: int = 500) -> int: ...
