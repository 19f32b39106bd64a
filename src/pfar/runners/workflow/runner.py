"""The workflow runner: advances a traced workflow task, with `trace.md` as its source of truth.

Every entry that is not the runner's own continuation (a start, a restart after
a crash) begins with the seed-003 recovery check: read the whole trace, verify
artifacts, classify, and apply the rule (completed: say so, never re-run;
between steps: summarise and go on; mid-step or failed: ask the owner, through
the same persisted questions as approvals). The step itself is a command run
in the task directory; its start and end are written to the trace (atomically)
and to the journal, and its process is recorded so a restart can end it.

The parts: the task's plan and where it runs (tasks.py), the step's command
(step_command.py), the owner's questions and answers (answers.py).
"""

from __future__ import annotations

import asyncio
import os

from ...errors import PfarError, VaultError
from ...journal import OwnerMessage, TaskRecord, TaskState, TaskUpdate
from ...journal.message_keys import FailedKey, MessageKind, ResultKey, WorkflowNoticeKey
from ...journal.payloads import Completed, Synthesizing
from ...journal.records import now_rfc3339
from ..services import Services
from . import answers
from .definition import WorkflowDefinition, load_definition
from .recovery_check import OwnerOption, RecoveryDecision, TraceState, decide, resume_entry
from .step_command import run_step
from .tasks import WORKFLOW_PREFIX, WorkflowRun, definition_hash, workflow_plan
from .trace_edit import append_resume, complete_workflow, new_trace, read_trace, write_trace_atomic

# the kernel makes a workflow's task from these
__all__ = ["WORKFLOW_PREFIX", "advance_workflow", "definition_hash", "workflow_plan"]

_MAX_OUTPUT = 2000


async def advance_workflow(task_id: str, svc: Services) -> None:
    """Advance a workflow task until it completes, fails, or waits on the owner."""
    task = await svc.journal.tasks.get(task_id)
    if not task.state.working:  # ended, parked on the owner, paused or being cancelled
        return
    run = WorkflowRun.of(task)
    try:
        definition = load_definition(run.definition_path)
        if not run.directory.is_dir():
            raise PfarError(f"workflow directory {run.directory} does not exist")
        await _advance(task, run, definition, svc)
    except (VaultError, asyncio.CancelledError):
        raise
    except PfarError as exc:  # an unreadable trace is never rewritten: the task stops here
        await _end(task, svc, TaskState.Failed, f"workflow {run.directory}: {exc}")


async def _advance(
    task: TaskRecord, run: WorkflowRun, definition: WorkflowDefinition, svc: Services
) -> None:
    names = [s.name for s in definition.steps]
    from_focus = False  # the owner chose to continue the step from its recorded focus
    if not run.trace_path.exists():
        trace = new_trace(definition.name, definition.task_spec, names, started=now_rfc3339())
        write_trace_atomic(run.trace_path, trace)
        next_step = 1
    else:
        trace = read_trace(run.trace_path)
        rd = decide(trace, run.directory, names)
        option = answers.owner_option(task, rd)
        if option is OwnerOption.investigate:
            await answers.ask(task, run, rd, svc, looked=True)
            return
        if option is not None:
            next_step = answers.apply_answer(option, rd, trace, run)
            _record_resume(run, rd)
            from_focus = option is OwnerOption.continue_
            trace = read_trace(run.trace_path)
        else:
            step = await _recovery_check(task, run, rd, svc)
            if step is None:
                return
            next_step = step
            trace = read_trace(run.trace_path)
    while next_step <= len(definition.steps):
        ok, state = await run_step(task, run, definition, trace, next_step, svc, from_focus)
        from_focus = False
        if state is not TaskState.Executing:
            # paused by the owner at this step's end: resuming starts with the recovery
            # check on the trace, which goes on from here (or asks about a failed step)
            return
        trace = read_trace(run.trace_path)
        if not ok:
            rd = decide(trace, run.directory, names)
            await answers.ask(task, run, rd, svc)
            return
        next_step += 1
    write_trace_atomic(run.trace_path, complete_workflow(trace))
    await _end(
        task,
        svc,
        TaskState.Completed,
        f"Workflow {definition.name} in {run.directory} completed: "
        f"{len(definition.steps)} steps ({', '.join(names)}).",
    )


async def _recovery_check(
    task: TaskRecord, run: WorkflowRun, rd: RecoveryDecision, svc: Services
) -> int | None:
    """Seed 003's rules for a trace found on entry. The step to run next, or None."""
    if rd.state is TraceState.not_started:
        return 1
    if rd.state is TraceState.completed:
        await _end(task, svc, TaskState.Completed, rd.message + " It was not re-run.")
        return None
    if rd.state is TraceState.between_steps and not rd.needs_owner:
        _record_resume(run, rd)
        await _tell(task, svc, "resume", rd)
        return rd.resume_step or 1
    # mid-step, failed, or between steps with artifacts missing: the owner decides
    await answers.ask(task, run, rd, svc)
    return None


def _record_resume(run: WorkflowRun, rd: RecoveryDecision) -> None:
    trace = read_trace(run.trace_path)
    entry = resume_entry(rd, now_rfc3339(), f"pfar kernel pid {os.getpid()}")
    write_trace_atomic(run.trace_path, append_resume(trace, entry))


async def _tell(task: TaskRecord, svc: Services, kind: str, rd: RecoveryDecision) -> None:
    missing = ""
    if rd.missing:
        missing = " Missing artifacts: " + ", ".join(a.path for a in rd.missing) + "."
    await svc.journal.events.enqueue(
        [
            OwnerMessage(
                WorkflowNoticeKey(kind, task.task_id, now_rfc3339()),
                MessageKind.notice,
                f"{rd.message}{missing}",
                task.task_id,
            )
        ]
    )
    svc.notify_owner()


async def _end(task: TaskRecord, svc: Services, state: TaskState, text: str) -> None:
    current = await svc.journal.tasks.get(task.task_id)
    if current.state.terminal or current.state.held:  # the owner's now (see pipeline._fail)
        return
    done = state is TaskState.Completed
    message = OwnerMessage(
        ResultKey(task.task_id) if done else FailedKey(task.task_id),
        MessageKind.result if done else MessageKind.notice,
        text,
        task.task_id,
    )
    if state is TaskState.Completed:
        if current.state is not TaskState.Synthesizing:
            await svc.journal.tasks.transition(task.task_id, Synthesizing(), point="synthesizing")
        await svc.journal.tasks.transition(
            task.task_id,
            Completed(),
            point="completed",
            # past its last step, as a pipeline's end records it (not "0/2")
            update=TaskUpdate(
                execute_progress={
                    "current_step": len(current.plan_steps),
                    "result": text[:_MAX_OUTPUT],
                }
            ),
            messages=[message],
        )
    else:
        await svc.journal.tasks.fail(task.task_id, text, [message])
    svc.notify_owner()
