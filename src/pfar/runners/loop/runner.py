"""The loop runner: an open-ended, tool-using agent whose every turn is durable.

`advance(task_id)` goes on from what the journal holds, like every runner:

* the last turn is the owner's (or pfar's) message or a results turn: the model's
  turn. Drift is checked, the context assembled, the request journaled as sent (to a
  remote model), and the answer appended in the commit that routes it: its tool
  calls (each numbered: its row in the task's steps) to run; an ended turn to the
  owner (`WaitingForUser`), or to the summary when the task runs `once`; an answer
  cut off at its token limit to pfar's own "continue".
* the last turn is the model's, with tool calls: each call not yet resolved runs
  through the step executor (layer 1 policy first, then the permission question),
  which journals its start before a write, replays a finished one, checks or asks
  about one a crash cut off. A tool's error is the call's result, not the task's
  failure. Once every call is resolved, their results are appended as one turn.

Nothing is held between calls but the journal: after a crash the same rules give
the same next step. Recovery's matrix (seed 001) falls out of the journal: a request
journaled as sent and no answer appended is made again; an answer appended is
routed without calling the model; a call marked started is the step executor's
(`in_flight_write`); a task waiting for the owner keeps waiting.

The parts, one module each: the model's turn (model_turn.py) and where its answer goes
(routing.py), the context it is sent (context_window.py), the drift check (drift.py),
the tool calls (tool_calls.py) and what the model is told of them (call_results.py),
and the task's end (endings.py).
"""

from __future__ import annotations

import asyncio

from ...errors import PfarError, VaultError
from ...journal import OwnerMessage, TaskState
from ...journal.message_keys import MessageKind, WorktreeKey
from ...journal.turns import AssistantTurn, LoopSettings, StoredTurn
from ..services import Services
from . import context, endings, subtasks, worktrees
from .context_window import context_stats, context_stats_of, offered_tools
from .model_turn import model_phase, route_held
from .tool_calls import tool_phase

# the kernel asks the runner for a task's context as the model would be sent it
__all__ = ["advance", "context_stats", "context_stats_of", "offered_tools"]


async def advance(task_id: str, svc: Services) -> None:
    """Advance a loop task until it waits for the owner, parks, or ends."""
    settings = await svc.journal.loops.settings(task_id)
    convo: list[StoredTurn] = await svc.journal.loops.turns(task_id)
    if settings.parent_task_id and await _orphaned(task_id, settings, svc):
        return
    if settings.use_worktree and settings.worktree is None and settings.worktree_error is None:
        settings = await _workspace(task_id, settings, svc)
    if settings.git_dir is None:  # before any tool of the task runs: what pfar's git uses
        settings = await worktrees.pin(settings)
        await svc.journal.loops.update_settings(task_id, settings)
    if svc.mcp is not None:  # started at their first use: their tools are offered, and
        await svc.mcp.ready()  # a call of one resumed after a crash finds it
    env: context.Environment | None = None  # looked at once, when the model is first asked
    while True:
        task = await svc.journal.tasks.get(task_id)
        if task.state is TaskState.Blocked:
            if not await subtasks.settle(task, svc):
                return  # its subtask works on; the kernel wakes it when that ends
            continue
        if not task.state.working:
            return
        try:
            if task.state is TaskState.Synthesizing:
                await endings.conclude(task, settings, convo, svc)
                return
            if task.state is not TaskState.Executing:
                raise PfarError(f"a loop task is never {task.state.value}")
            last = convo[-1].turn
            if isinstance(last, AssistantTurn) and last.calls:
                going = await tool_phase(task, settings, convo, last, svc)
            elif isinstance(last, AssistantTurn):
                going = await route_held(task, settings, convo, svc)
            else:
                env = env or await context.environment(settings)
                going = await model_phase(task, settings, convo, env, svc)
            if not going:
                return
        except (VaultError, asyncio.CancelledError):
            raise
        except PfarError as exc:
            await endings.fail(task, settings, svc, str(exc))
            return


async def _workspace(task_id: str, settings: LoopSettings, svc: Services) -> LoopSettings:
    """Phase 1.3: the task's own worktree, recorded before any tool runs in it."""
    made = await worktrees.make(task_id, settings)
    messages = []
    if made.notice is not None:
        title = settings.title or task_id[:8]
        messages.append(
            OwnerMessage(
                message_key=WorktreeKey(task_id),
                kind=MessageKind.notice,
                task_id=task_id,
                body=f"Task {title} ({task_id[:8]}) {made.notice}",
            )
        )
    await svc.journal.loops.update_settings(task_id, made.settings, messages)
    if messages:
        svc.notify_owner()
    return made.settings


async def _orphaned(task_id: str, settings: LoopSettings, svc: Services) -> bool:
    """A subtask whose parent has ended (cancelled while the kernel died between the
    two cancels, say) has no one to answer: it fails, saying so."""
    assert settings.parent_task_id is not None
    parent = await svc.journal.tasks.get(settings.parent_task_id)
    if not parent.state.terminal:
        return False
    task = await svc.journal.tasks.get(task_id)
    if task.state.terminal:
        return True
    await endings.fail(
        task,
        settings,
        svc,
        f"its parent task {parent.task_id[:8]} ended ({parent.state.value}) before it did",
    )
    return True
