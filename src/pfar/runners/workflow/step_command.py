"""One workflow step: its command run in the task directory (confined as a Bash call is
when the sandbox is on), its start and end written to the trace (atomically) and to the
journal, and its process recorded so a restart can end it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from ...errors import PfarError
from ...journal import Idempotency, Semantics, StepRecord, StepStatus, TaskRecord, TaskState
from ...journal.records import now_rfc3339
from ...tools import task_processes
from ...tools.processes import identity, kill_group
from ..paths import exists_inside
from ..services import Services
from .definition import WorkflowDefinition
from .tasks import STEP_TOOL, WorkflowRun
from .trace import Trace
from .trace_edit import complete_step, fail_step, read_trace, start_step, write_trace_atomic


async def run_step(
    task: TaskRecord,
    run: WorkflowRun,
    definition: WorkflowDefinition,
    trace: Trace,
    number: int,
    svc: Services,
    from_focus: bool = False,
) -> tuple[bool, TaskState]:
    """Run one step: (whether it succeeded, the task's state after its commit)."""
    spec = definition.steps[number - 1]
    focus = ""
    s = trace.step(number)
    if s is not None and s.current_focus and from_focus:
        focus = s.current_focus
    write_trace_atomic(run.trace_path, start_step(trace, number, spec.name, current_focus=focus))
    i = number - 1
    started = now_rfc3339()
    args = {"name": spec.name, "run": spec.run, "artifacts": spec.artifacts}
    await svc.journal.tasks.step_started(
        StepRecord(
            task.task_id,
            i,
            STEP_TOOL,
            Semantics.Write,
            Idempotency.none,
            StepStatus.started,
            args,
            None,
            "Raw",
            started,
            None,
            None,
        )
    )
    env = {
        **os.environ,
        "PFAR_TASK_ID": task.task_id,
        "PFAR_WORKFLOW": definition.name,
        "PFAR_STEP": spec.name,
        "PFAR_TRACE": str(run.trace_path),
        "PFAR_CURRENT_FOCUS": focus,
    }
    env = task_processes.env(env, task.task_id)  # what it leaves running ends with the task
    try:
        code, out, err = await _execute(
            spec.run, run.directory, env, spec.timeout_seconds, task, i, svc
        )
    except asyncio.CancelledError:
        await _note_cut_off(task, run, number, spec.name, svc)
        raise
    missing = [a for a in spec.artifacts if not exists_inside(run.directory, a)]
    trace = read_trace(run.trace_path)
    summary = _last_line(out) or f"{spec.name} finished"
    if code == 0 and not missing:
        trace = complete_step(trace, number, summary=summary, artifacts=spec.artifacts)
        status, error = StepStatus.completed, None
    else:
        why = (
            f"exit code {code}"
            if code != 0
            else f"expected artifacts missing: {', '.join(missing)}"
        )
        trace = fail_step(
            trace,
            number,
            summary=f"{spec.name} failed: {why}",
            challenges=svc.redactor.text(_tail(err) or why),
        )
        status, error = StepStatus.failed, why
    write_trace_atomic(run.trace_path, trace)
    rec = StepRecord(
        task.task_id,
        i,
        STEP_TOOL,
        Semantics.Write,
        Idempotency.none,
        status,
        args,
        {"exit_code": code, "summary": svc.redactor.text(summary)},
        "Raw",
        started,
        now_rfc3339(),
        error,
    )
    state = await svc.journal.tasks.step_finished(rec, next_step=i + 1)
    return status is StepStatus.completed, state


async def _note_cut_off(
    task: TaskRecord, run: WorkflowRun, number: int, name: str, svc: Services
) -> None:
    """The owner cancelled the task while this step ran (its command is ended): the
    trace says so, as the journal does, since the step may have had effects. The trace
    is written without awaiting (only the state is read before), so a second cancel
    cannot cut the write off half-way through.
    A kernel stopping (not a cancel) leaves the step in progress for the next start."""
    if (await svc.journal.tasks.get(task.task_id)).state is not TaskState.Cancelling:
        return
    with contextlib.suppress(PfarError, OSError):
        trace = read_trace(run.trace_path)
        write_trace_atomic(
            run.trace_path,
            fail_step(
                trace,
                number,
                summary=f"{name} cut off: the task was cancelled while it ran",
                challenges="it may have had (some of) its effects; check before running it again",
            ),
        )


async def _execute(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    task: TaskRecord,
    step: int,
    svc: Services,
) -> tuple[int, str, str]:
    box = None if svc.sandbox is None else svc.sandbox(task.task_id, cwd)
    if box is not None:  # [sandbox] enabled: a workflow's step is confined as a Bash call is
        argv, env = box.wrap(argv), box.env(env)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return 127, "", f"cannot start {argv[0]!r}: {exc}"
    process = identity(proc.pid)
    if process is not None:
        await svc.journal.tasks.step_process(task.task_id, step, process)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        kill_group(proc.pid)
        await proc.wait()
        return 124, "", f"the step did not finish within {timeout:g}s"
    except asyncio.CancelledError:
        kill_group(proc.pid)
        raise
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _tail(text: str) -> str:
    return text.strip()[-500:]
