"""The owner's hold on a task: cancel, pause, resume (the kernel's side of them).

Cancel: the intent is committed first (the task is Cancelling: never resumed again,
and a crash from here on is finished by the next start), then the task's coroutine
is cancelled, then every process its running step started is ended, then the task
is Cancelled with that step recorded as cut off, in one commit with the owner's
message.

Pause stops a task between steps, never inside one: a running task is asked to
pause and parks itself (Paused) at its next boundary, when its current step or
thinking phase has finished and been journaled; a task no coroutine holds is
Paused at once. A task parked on the owner's answer is not paused (it holds
nothing already): it can be answered or cancelled.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Protocol

from ..answers import Actor
from ..errors import MalformedTaskRow, ShuttingDown, TaskStateRefused
from ..journal import OwnerMessage, TaskKind, TaskRecord
from ..journal.holds import CancelOutcome, HoldOutcome, PauseOutcome, ResumeOutcome
from ..journal.message_keys import CancelledKey, MessageKind, WorktreeEndKey
from ..journal.states import TaskState
from ..journal.store import Store
from ..recovery.cancelling import cancel_message
from ..runners import Services
from ..runners.loop import worktrees
from . import task_processes
from .audit import AuditLog
from .owner import OwnerChannel


class Coroutines(Protocol):
    """The kernel's task coroutines, as a hold moves them (kernel/driver.py)."""

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None: ...

    def is_running(self, task_id: str) -> bool: ...

    async def stop_coroutine(self, task_id: str) -> None: ...

    async def wake_parent(self, task_id: str) -> None: ...


class HoldsHost(Protocol):
    """What a hold uses of the kernel."""

    journal: Store
    audit: AuditLog
    owner: OwnerChannel
    services: Services

    @property
    def driver(self) -> Coroutines: ...

    @property
    def accepting(self) -> bool: ...

    def title(self, task: TaskRecord) -> str: ...

    async def end_processes(self, task_id: str | None, event: str) -> int: ...


@dataclass(frozen=True, slots=True)
class HoldResult:
    """What a cancel, pause or resume did, for the operator API's callers."""

    task_id: str
    state: TaskState  # the task's state once the request was carried out
    outcome: HoldOutcome
    withdrawn: list[str] = field(default_factory=list)  # question ids withdrawn by a cancel
    cut_off_steps: list[int] = field(default_factory=list)  # 0-based, cut off by a cancel
    processes_ended: int = 0


async def cancel_with_subtasks(k: HoldsHost, given_id: str, by: Actor) -> HoldResult:
    """End the task as Cancelled: intent committed, coroutine cancelled, processes
    ended, questions withdrawn; and its subtasks with it. Refused (TaskStateRefused)
    for an ended task. `by` (who) is journaled with each cancel."""
    if not k.accepting:
        raise ShuttingDown()
    result = await cancel(k, given_id, by)
    # its subtasks have no one to answer any more; a subtask's parent goes on
    for child in await _unfinished_children(k.journal, result.task_id):
        with contextlib.suppress(TaskStateRefused):  # it ended meanwhile
            await cancel(k, child, by)
    # what its commands (and its subtasks') left running, parked or not
    await task_processes.end_processes(k.journal, task_processes.terminal)
    await k.driver.wake_parent(result.task_id)
    await _finish_worktree(k, result.task_id)
    return result


async def _finish_worktree(k: HoldsHost, task_id: str) -> None:
    """A cancelled loop task's worktree: kept for a look, or removed (its branch kept)."""
    task = await k.journal.tasks.get(task_id)
    if task.kind is not TaskKind.loop:
        return
    settings = await k.journal.loops.settings(task_id)
    if settings.parent_task_id or settings.worktree is None:
        return
    keep = k.services.loop.keep_failed_worktrees
    note = await worktrees.finish(task_id, settings, succeeded=False, keep=keep)
    if note:
        message = OwnerMessage(WorktreeEndKey(task_id), MessageKind.notice, note, task_id)
        await k.journal.events.enqueue([message])
        k.owner.notify()


async def _unfinished_children(journal: Store, task_id: str) -> list[str]:
    task = await journal.tasks.get(task_id)
    if task.kind is not TaskKind.loop:
        return []
    out = []
    for child in await journal.loops.children(task_id):
        if not (await journal.tasks.get(child)).state.terminal:
            out.append(child)
            out.extend(await _unfinished_children(journal, child))
    return out


async def cancel(k: HoldsHost, given_id: str, by: Actor) -> HoldResult:
    task_id = await k.journal.tasks.resolve_id(given_id)
    # refuses an ended task, naming its state
    intent = await k.journal.tasks.begin_cancel(task_id, by=str(by))
    withdrawn = [*intent.approvals, *intent.prompts]
    k.audit.log(
        "task_cancel_intended",
        task_id=task_id,
        from_state=intent.from_state.value,
        withdrawn=withdrawn,
        by=str(by),
    )
    await k.driver.stop_coroutine(task_id)
    ended = await k.end_processes(task_id, "cancelled_process_ended")
    try:
        task = await k.journal.tasks.get(task_id)
        message = await cancel_message(k.journal, task, k.title(task))
    except MalformedTaskRow:  # a row only its state can be read of still ends
        message = OwnerMessage(
            CancelledKey(task_id), MessageKind.notice, f"Task {task_id[:8]} was cancelled.", task_id
        )
    cut = await k.journal.tasks.finish_cancel(task_id, message)
    k.owner.notify()
    if cut is None:  # a cancel running alongside finished it first
        return HoldResult(task_id, TaskState.Cancelled, CancelOutcome.already_cancelled)
    k.audit.log("task_cancelled", task_id=task_id, cut_off_steps=cut, processes_ended=ended)
    return HoldResult(task_id, TaskState.Cancelled, CancelOutcome.cancelled, withdrawn, cut, ended)


async def pause(k: HoldsHost, given_id: str, by: Actor) -> HoldResult:
    """Pause the task at its next step boundary (now, if no coroutine holds it); `by`
    (who) is journaled with the request and told when the pause is reached."""
    if not k.accepting:
        raise ShuttingDown()
    task_id = await k.journal.tasks.resolve_id(given_id)
    # decided when the commit runs (on the loop's thread): no coroutine can start or stop
    # between the look and the write
    state, outcome = await k.journal.tasks.request_pause(
        task_id, running=lambda: k.driver.is_running(task_id), by=str(by)
    )
    if outcome is not PauseOutcome.already:
        k.audit.log(
            "task_pause", task_id=task_id, outcome=outcome.value, state=state.value, by=str(by)
        )
    return HoldResult(task_id, state, outcome)


async def resume(k: HoldsHost, given_id: str, by: Actor) -> HoldResult:
    """Continue a paused task from the journal (or withdraw a pause not yet reached);
    `by` (who) is journaled with the resume."""
    if not k.accepting:
        raise ShuttingDown()
    task_id = await k.journal.tasks.resolve_id(given_id)
    state, outcome = await k.journal.tasks.unpause(task_id, by=str(by))
    k.audit.log(
        "task_resume", task_id=task_id, outcome=outcome.value, state=state.value, by=str(by)
    )
    if outcome is ResumeOutcome.resumed:
        k.driver.advance(task_id)
    return HoldResult(task_id, state, outcome)


def allowed_holds(state: TaskState | str) -> tuple[str, ...]:
    """The holds the owner may ask of a task in `state`, as the journal decides them
    (journal/holds.py): pause a working or queued task, resume a paused one, cancel one
    not ended and not already being cancelled. A task parked on the owner's answer is
    answered or cancelled, not paused; a row whose state is no state takes none."""
    if not isinstance(state, TaskState) or state.terminal or state is TaskState.Cancelling:
        return ()
    if state is TaskState.Paused:
        return ("resume", "cancel")
    if state.working or state is TaskState.Queued:
        return ("pause", "cancel")
    return ("cancel",)


def describe(r: HoldResult) -> str:
    """A HoldResult in the owner's words: the CLI's and the chat channels'."""
    tid, state, outcome = r.task_id, r.state.value, r.outcome
    if outcome is CancelOutcome.cancelled:
        lines = [f"task {tid} Cancelled"]
        if r.withdrawn:
            lines.append(f"  withdrawn: question {', '.join(q[:8] for q in r.withdrawn)}")
        for step in r.cut_off_steps:
            lines.append(
                f"  step {step + 1} was cut off while it ran: it may have had (some of) its effects"
            )
        if r.processes_ended:
            lines.append(f"  processes ended: {r.processes_ended}")
        return "\n".join(lines)
    words: dict[HoldOutcome, str] = {
        CancelOutcome.already_cancelled: f"task {tid} was already Cancelled; nothing changed",
        PauseOutcome.paused: f"task {tid} Paused; `pfar resume {tid[:8]}` continues it",
        PauseOutcome.requested: (
            f"task {tid} ({state}) will pause when its current step ends; "
            f"`pfar tasks --state Paused` lists it then"
        ),
        PauseOutcome.already: (
            f"task {tid} is already Paused; nothing changed"
            if state == TaskState.Paused.value
            else f"task {tid} ({state}) already has a pause requested; nothing changed"
        ),
        ResumeOutcome.resumed: f"task {tid} resumes ({state})",
        ResumeOutcome.withdrawn: (
            f"task {tid} ({state}) had not reached its pause yet: the pause request is "
            "withdrawn and it goes on running"
        ),
    }
    return words[outcome]
