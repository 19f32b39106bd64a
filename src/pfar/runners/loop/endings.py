"""How a loop task ends: completed with its summary, cost and iterations, or failed;
either way its worktree finished and the owner told (a subtask's parent tells instead)."""

from __future__ import annotations

from collections.abc import Sequence

from ...journal import OwnerMessage, TaskRecord, TaskUpdate
from ...journal.message_keys import FailedKey, MessageKind, ResultKey
from ...journal.payloads import Completed
from ...journal.turns import LoopSettings, StoredTurn
from ..services import Services
from ..spend_caps import SpendCapReached
from ..step_rules import retry_hint
from . import context, context_window, worktrees


async def conclude(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> None:
    """Completed, with its summary (the last answer, or the cheap tier's), its cost and
    its iterations (Phase 6)."""
    answers = context.answers(convo)
    summary = next((a.text for a in reversed(answers) if a.text.strip()), "")
    if not summary:
        try:
            summary = await context_window.summarize(task, settings, convo, svc)
        except SpendCapReached:  # done, and the cheap tier's summary would pass the cap
            summary = "(no summary: its model call would have passed the task's spend cap)"
    usage = await svc.journal.tasks.llm_usage(task.task_id)
    title = settings.title or task.task_id[:8]
    merge = ""
    if not settings.parent_task_id:  # a subtask works in its parent's worktree
        merge = await worktrees.finish(task.task_id, settings, succeeded=True, keep=True)
    await svc.journal.tasks.transition(
        task.task_id,
        Completed(),
        point="completed",
        update=TaskUpdate(
            execute_progress={
                "current_step": task.current_step,
                "result": summary[:2000],
                "iterations": len(answers),
                "cost_usd": usage["cost_usd"],
            }
        ),
        # a subtask's answer goes to its parent, which tells the owner in its own words
        messages=[]
        if settings.parent_task_id
        else [
            OwnerMessage(
                message_key=ResultKey(task.task_id),
                kind=MessageKind.result,
                task_id=task.task_id,
                body=f"Task {title} ({task.task_id[:8]}) finished:\n{summary}"
                + (f"\n\n{merge}" if merge else ""),
            )
        ],
    )
    svc.notify_owner()


async def fail(
    task: TaskRecord,
    settings: LoopSettings,
    svc: Services,
    error: str,
    *,
    recoverable: bool = False,
) -> None:
    """Failed, with the owner told. `recoverable`: the owner may retry it (a subtask's
    never is: its failure is already its parent's call result)."""
    current = await svc.journal.tasks.get(task.task_id)
    if current.state.terminal or current.state.held:
        return
    title = settings.title or task.task_id[:8]
    kept = ""
    if not settings.parent_task_id:
        keep = svc.loop.keep_failed_worktrees
        kept = await worktrees.finish(task.task_id, settings, succeeded=False, keep=keep)
    recoverable = recoverable and not settings.parent_task_id
    await svc.journal.tasks.fail(
        task.task_id,
        error,
        [
            OwnerMessage(
                message_key=FailedKey(task.task_id),
                kind=MessageKind.notice,
                task_id=task.task_id,
                body=f"Task {title} ({task.task_id[:8]}) failed: {error}"
                + (f"\n{kept}" if kept else "")
                + (f"\n{retry_hint(task.task_id)}" if recoverable else ""),
            )
        ],
        recoverable=recoverable,
    )
    svc.notify_owner()
