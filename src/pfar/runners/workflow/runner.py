"""The workflow runner: advances a traced workflow task, with `trace.md` as its source of truth.

Every entry that is not the runner's own continuation (a start, a restart after
a crash) begins with the seed-003 recovery check: read the whole trace, verify
artifacts, classify, and apply the rule (completed: say so, never re-run;
between steps: summarise and go on; mid-step or failed: ask the owner, through
the same persisted questions as approvals). The step itself is a command run
in the task directory; its start and end are written to the trace (atomically)
and to the journal, and its process is recorded so a restart can end it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...answers import Abort, Answer, Back, Continue, Investigate, Rerun, Retry, Skip
from ...errors import AnswerDoesNotFit, PfarError, VaultError
from ...journal import (
    ApprovalRecord,
    Idempotency,
    Move,
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from ...journal.payloads import Completed, Executing, Failed, Synthesizing, WorkflowAnswer
from ...journal.records import now_rfc3339
from ...tools import task_processes
from ...tools.processes import identity, kill_group
from ..asking import ask_owner
from ..paths import exists_inside
from ..services import Services
from .definition import WorkflowDefinition, load_definition
from .recovery_check import OwnerOption, RecoveryDecision, TraceState, decide, resume_entry
from .trace import (
    Trace,
)
from .trace_edit import (
    append_resume,
    complete_step,
    complete_workflow,
    fail_step,
    new_trace,
    read_trace,
    start_step,
    update_step,
    write_trace_atomic,
)

WORKFLOW_PREFIX = "workflow:"
STEP_TOOL = "workflow.step"
_MAX_OUTPUT = 2000


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    definition_path: Path
    directory: Path

    @classmethod
    def of(cls, task: TaskRecord) -> WorkflowRun:
        payload = (task.trigger_event or {}).get("payload", {})
        return cls(Path(payload["definition"]), Path(payload["directory"]))

    @property
    def trace_path(self) -> Path:
        return self.directory / "trace.md"


def definition_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def workflow_plan(definition: WorkflowDefinition) -> dict[str, Any]:
    """The journal's view of the workflow: one plan step per workflow step."""
    return {
        "steps": [
            {
                "tool": STEP_TOOL,
                "args": {"name": s.name, "run": s.run, "artifacts": s.artifacts},
                "description": s.description or s.name,
            }
            for s in definition.steps
        ]
    }


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
        option = _owner_option(task, rd)
        if option is OwnerOption.investigate:
            await _ask(task, run, rd, svc, looked=True)
            return
        if option is not None:
            next_step = _apply_answer(option, rd, trace, run)
            from_focus = option is OwnerOption.continue_
            trace = read_trace(run.trace_path)
        else:
            step = await _recovery_check(task, run, rd, svc)
            if step is None:
                return
            next_step = step
            trace = read_trace(run.trace_path)
    while next_step <= len(definition.steps):
        ok, state = await _run_step(task, run, definition, trace, next_step, svc, from_focus)
        from_focus = False
        if state is not TaskState.Executing:
            # paused by the owner at this step's end: resuming starts with the recovery
            # check on the trace, which goes on from here (or asks about a failed step)
            return
        trace = read_trace(run.trace_path)
        if not ok:
            rd = decide(trace, run.directory, names)
            await _ask(task, run, rd, svc)
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
    await _ask(task, run, rd, svc)
    return None


def _record_resume(run: WorkflowRun, rd: RecoveryDecision) -> None:
    trace = read_trace(run.trace_path)
    entry = resume_entry(rd, now_rfc3339(), f"pfar kernel pid {os.getpid()}")
    write_trace_atomic(run.trace_path, append_resume(trace, entry))


def _owner_option(task: TaskRecord, rd: RecoveryDecision) -> OwnerOption | None:
    """The owner's answer, when the trace is still where the question found it (the same
    step, in the same state) and the answer is one of the choices that state offers; None
    leaves the decision to the recovery check.

    An answer already carried out on the trace (a skip has moved it on to the next step)
    matches no longer, so it is never applied to a step it was not about.
    """
    answer = task.payload.workflow_answer if isinstance(task.payload, Executing) else None
    if answer is None or rd.resume_step is None:
        return None
    if answer.step != rd.resume_step - 1 or answer.question != _question(rd):
        return None
    try:
        option = OwnerOption(answer.option)
    except ValueError:
        return None
    # an abort ends the task in the commit that records it, so none is ever stored: one
    # found (a hand-edited row) is not carried out, and the question is asked again
    if option is OwnerOption.abort:
        return None
    return option if option in rd.options else None


def _apply_answer(option: OwnerOption, rd: RecoveryDecision, trace: Trace, run: WorkflowRun) -> int:
    """Carry out the owner's answer on the trace; the step to run next. (An abort never
    gets here: `answer_outcome` ends the task in the commit that records the answer.)"""
    step = rd.resume_step or 1
    if option is OwnerOption.skip:
        s = trace.step(step)
        trace = update_step(
            trace,
            step,
            summary=((s.summary + " ") if s and s.summary else "") + "(skipped by the owner)",
        )
        write_trace_atomic(run.trace_path, complete_step(trace, step))
        step += 1
    elif option is OwnerOption.back:
        step = max(1, step - 1)
    _record_resume(run, rd)
    return step


async def _run_step(
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


async def _ask(
    task: TaskRecord, run: WorkflowRun, rd: RecoveryDecision, svc: Services, *, looked: bool = False
) -> None:
    """Park on the owner's decision. After "investigate", ask again once they have looked."""
    step = (rd.resume_step or 1) - 1
    missing = ""
    if rd.missing:
        missing = "\nMissing artifacts: " + ", ".join(a.path for a in rd.missing)
    options = [o.value for o in rd.options]
    message = rd.message
    if looked:
        options = [o for o in options if o != OwnerOption.investigate.value]
        if OwnerOption.abort.value not in options:
            options.append(OwnerOption.abort.value)
        message = (
            f"You chose to look at Step {rd.resume_step} ({rd.resume_name}) first. "
            f"When you are ready: {', '.join(options)}.\n{rd.message}"
        )
    await ask_owner(
        await svc.journal.tasks.get(task.task_id),
        svc,
        action_type=_question(rd),
        step=step,
        tool=STEP_TOOL,
        options=options,
        description=f"Workflow in {run.directory}: {message}{missing}",
    )


def _question(rd: RecoveryDecision) -> str:
    """The kind of question the trace's state asks (an approval's action_type)."""
    return f"workflow_{rd.state.value}"


async def _tell(task: TaskRecord, svc: Services, kind: str, rd: RecoveryDecision) -> None:
    missing = ""
    if rd.missing:
        missing = " Missing artifacts: " + ", ".join(a.path for a in rd.missing) + "."
    await svc.journal.events.enqueue(
        [
            OwnerMessage(
                f"workflow-{kind}:{task.task_id}:{now_rfc3339()}",
                "notice",
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
    message = OwnerMessage(
        f"{'result' if state is TaskState.Completed else 'failed'}:{task.task_id}",
        "result" if state is TaskState.Completed else "notice",
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


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _tail(text: str) -> str:
    return text.strip()[-500:]


def answer_outcome(task: TaskRecord, approval: ApprovalRecord, answer: Answer) -> Move:
    """Where the owner's answer to a workflow question sends the task: one dispatch over
    the answers a workflow asks with (recovery_check.OwnerOption).

    The answer is bound to the step and the question it answered, and is good for one
    run of that step ("investigate": the question is asked again once they have looked).
    """
    step = approval.step if approval.step is not None else task.current_step
    match answer:
        case Abort():
            return Move(Failed(), TaskUpdate(error="workflow aborted by the owner"))
        case Continue() | Rerun() | Investigate() | Retry() | Skip() | Back():
            bound = WorkflowAnswer(
                option=answer.kind,
                question=approval.action_type,
                step=step,
                approval_id=approval.approval_id,
            )
            return Move(Executing(current_step=task.current_step, workflow_answer=bound))
        case _:
            raise AnswerDoesNotFit(approval.approval_id, answer.kind, approval.options)
