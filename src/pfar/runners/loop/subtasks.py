"""The Task tool (seed 001, 4.4): a subtask with its own loop, its answer the call's result.

A Task call is not run in the parent's coroutine. Its commit creates the child loop
task (exactly once: the child's event id is the parent's id and the call's number,
so a call started again after a crash finds the child it started), marks the call
started, and blocks the parent on the child (`Blocked`): the parent holds no
coroutine while the child works, however long that is and however many restarts
come between. When the child ends, the kernel wakes the parent, whose next advance
records the child's answer (or its failure) as the call's outcome and goes on.

A child runs `once` (its first ended turn is its answer), in the parent's directory,
with the parent's tier, one level deeper; past `[loop] max_depth` a Task call is
refused like any call the policy refuses, and the model is told to do the work itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...journal import StepRecord, StepStatus, TaskRecord, TaskState
from ...journal.payloads import Blocked
from ...journal.records import Idempotency, InboundEvent, Semantics, now_rfc3339
from ...journal.turns import LoopCall, LoopSettings
from ...llm.messages import ToolSchema
from ...tools.base import check_args
from ..services import Services
from .tasks import LOOP_TEMPLATE, LoopRequest, loop_task

TASK = "Task"
SCHEMA = ToolSchema(
    TASK,
    "Start a subtask: another agent with the same tools works on `prompt` in the same "
    "directory, on its own conversation, and its final answer is this call's result. "
    "Use it for a self-contained piece of work (a search across many files, a fix in "
    "one module) whose details you do not need in your own context. The subtask "
    "cannot ask you anything: say everything it needs in `prompt`.",
    {
        "type": "object",
        "properties": {
            "description": {
                "type": "string",
                "minLength": 1,
                "maxLength": 120,
                "description": "a short (3-8 words) name for the subtask",
            },
            "prompt": {
                "type": "string",
                "minLength": 1,
                "description": "the subtask's instructions, complete in themselves",
            },
        },
        "required": ["description", "prompt"],
        "additionalProperties": False,
    },
)


def refusal(call: LoopCall, settings: LoopSettings, svc: Services) -> str | None:
    """Why this Task call cannot start a subtask (its result), or None."""
    try:
        check_args(TASK, SCHEMA.input_schema, call.input)
    except Exception as exc:  # ToolFailed: the schema's complaint, naming the argument
        return f"Invalid parameters: {exc}"
    if settings.depth >= svc.loop.max_depth:
        return (
            f"Subtasks nest at most {svc.loop.max_depth} deep ([loop] max_depth) and this "
            f"task is at depth {settings.depth}: do this work yourself, with your other tools"
        )
    return None


async def spawn(task: TaskRecord, settings: LoopSettings, call: LoopCall, svc: Services) -> None:
    """Start the call's subtask (or find the one it started) and block `task` on it."""
    prompt = str(call.input["prompt"])
    description = " ".join(str(call.input["description"]).split())
    event = InboundEvent(
        event_id=f"subtask:{task.task_id}:{call.step}",
        adapter="subtask",
        template_id=LOOP_TEMPLATE,
        text=prompt,
        payload={"parent_task_id": task.task_id, "step": call.step},
    )
    # a subtask waits for a slot as its parent did
    request = LoopRequest(
        prompt, settings.working_dir, settings.tier, True, description, priority=settings.priority
    )
    child, child_settings = loop_task(request, prompt, event)
    child_settings = dataclasses.replace(
        child_settings,
        worktree=settings.worktree,
        repository=settings.repository,
        branch=settings.branch,
        git_dir=settings.git_dir,
        git_work_tree=settings.git_work_tree,
        parent_task_id=task.task_id,
        parent_step=call.step,
        depth=settings.depth + 1,
        skills=settings.skills,  # what its parent was given, as journaled
    )
    started = now_rfc3339()
    row = _row(task.task_id, call, StepStatus.started, started, None, None)
    # a new child takes a slot or is created Queued (TaskStarted only if it starts)
    if svc.enter is not None and not svc.enter(child.task_id, settings.priority):
        child = child.queued(settings.priority)
    forget = svc.forget or (lambda _: None)
    try:
        spawned = await svc.journal.loops.spawn(row, child, child_settings, prompt, event)
    except BaseException:
        forget(child.task_id)
        raise
    if spawned.task_id != child.task_id:
        forget(child.task_id)  # the call ran before a crash: its child exists already
    if svc.advance is not None:
        svc.advance(spawned.task_id)


async def settle(task: TaskRecord, svc: Services) -> bool:
    """A blocked task whose subtask has ended: record the child's answer as the Task
    call's outcome and unblock it (True: it goes on). False while the child works."""
    blocked = task.payload
    if not isinstance(blocked, Blocked):
        return False
    child = await svc.journal.tasks.get(blocked.child_task_id)
    if not child.state.terminal:
        return False
    known = await svc.journal.tasks.step(task.task_id, blocked.step)
    started = known.started_at if known is not None else now_rfc3339()
    call = LoopCall(
        id="",
        name=TASK,
        input=known.args if known is not None else {},
        step=blocked.step,
    )
    if child.state is TaskState.Completed:
        result = (child.execute_progress or {}).get("result")
        text = result if isinstance(result, str) and result.strip() else "(no answer)"
        row = _row(task.task_id, call, StepStatus.completed, started, {"text": text}, None)
    else:
        row = _row(task.task_id, call, StepStatus.failed, started, None, _why(child))
    await svc.journal.loops.unblock(row)
    return True


def _why(child: TaskRecord) -> str:
    name = f"The subtask ({child.task_id[:8]})"
    if child.state is TaskState.Cancelled:
        return f"{name} was cancelled by the owner before it finished; it gave no answer"
    if child.state is TaskState.Abandoned:
        return f"{name} was abandoned after a restart: {child.error or 'no reason recorded'}"
    return f"{name} failed: {child.error or 'no reason recorded'}"


def _row(
    task_id: str,
    call: LoopCall,
    status: StepStatus,
    started: str,
    result: Any,
    error: str | None,
) -> StepRecord:
    done = None if status is StepStatus.started else now_rfc3339()
    return StepRecord(
        task_id,
        call.step,
        TASK,
        Semantics.Write,
        Idempotency.check,  # its child, found again by its event id
        status,
        call.input,
        result,
        "Extracted",
        started,
        done,
        error,
    )
