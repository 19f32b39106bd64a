"""`pfar task retry ID`: one verb, the right thing for the task's state.

A Failed task whose failure is recoverable (a model call that failed after its
retries, a question whose deadline passed, a step that may run again: see
docs/loop.md) goes back to the working state it failed in, from the journal, as a
resume does: completed steps and writes are not run again, a write in doubt follows
the normal rules, a loop's conversation goes on from its last turn. The move and its
TaskRetried event (who retried it, and the failure retried) are one commit; a second
retry, alongside or after, finds the task Failed no more and is refused.

A loop task that waits for the owner after its model's answer: that answer is
discarded and the model asked again (`/retry`), as before.

Anything else is refused, naming the state and why (not failed; failed, but not
recoverably: with what failed).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from ..answers import Actor
from ..errors import ShuttingDown, TaskStateRefused
from ..journal import TaskKind
from ..journal.payloads import Failed
from ..journal.states import TaskState
from ..journal.store import Store
from .audit import AuditLog


class RetryHost(Protocol):
    """What a retry uses of the kernel."""

    journal: Store
    audit: AuditLog

    @property
    def accepting(self) -> bool: ...

    def advance(self, task_id: str) -> None: ...


class RetryOutcome(StrEnum):
    retried = "retried"  # a Failed task continues from the journal where it failed
    answer_discarded = "answer_discarded"  # a loop's answer that waited: asked again


@dataclass(frozen=True, slots=True)
class RetryResult:
    """What `task retry` did, for the operator API's callers."""

    task_id: str
    state: TaskState  # the task's state once the retry was carried out
    outcome: RetryOutcome
    retry_count: int = 0  # a Failed task's retries, this one included

    def text(self) -> str:
        """In the owner's words: the CLI's and the chat channels'."""
        if self.outcome is RetryOutcome.answer_discarded:
            return (
                f"task {self.task_id} ({self.state.value}): its model's answer is discarded "
                "and the model is asked again"
            )
        return (
            f"task {self.task_id} retried (retry {self.retry_count}): it goes on from the "
            f"journal where it failed ({self.state.value})"
        )


async def retry(k: RetryHost, given_id: str, by: Actor) -> RetryResult:
    """Retry the task as its state allows (module docstring); `by` is journaled with it."""
    if not k.accepting:
        raise ShuttingDown()
    task_id = await k.journal.tasks.resolve_id(given_id)
    task = await k.journal.tasks.get(task_id)
    if task.state is TaskState.WaitingForUser:
        state = await k.journal.loops.retry(task_id, by=str(by))
        k.audit.log("user_input", task_id=task_id, retry=True, by=str(by))
        k.advance(task_id)
        return RetryResult(task_id, state, RetryOutcome.answer_discarded)
    if isinstance(task.payload, Failed) and task.payload.recoverable:
        await _check_workspace(k.journal, task_id, task.kind)
    # checked again in the commit that moves it: a retry alongside finds it moved
    state = await k.journal.tasks.retry(task_id, by=str(by))
    count = (task.payload.retry_count if isinstance(task.payload, Failed) else 0) + 1
    k.audit.log("task_retried", task_id=task_id, state=state.value, retry=count, by=str(by))
    k.advance(task_id)
    return RetryResult(task_id, state, RetryOutcome.retried, count)


async def _check_workspace(journal: Store, task_id: str, kind: TaskKind) -> None:
    """A loop task that worked in its own worktree goes on only there: one removed when
    the task failed (`[loop] keep_failed_worktrees = false`) is not made again behind
    the owner's back, and the retry is refused saying where its work is."""
    if kind is not TaskKind.loop:
        return
    settings = await journal.loops.settings(task_id)
    if settings.worktree is None or Path(settings.worktree).is_dir():
        return
    raise TaskStateRefused(
        task_id,
        TaskState.Failed.value,
        "retried",
        f"its worktree {settings.worktree} was removed when it failed (its work is on "
        f"branch {settings.branch}); start a new task on that branch instead",
    )
