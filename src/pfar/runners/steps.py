"""The step executor: one tool call of a task, made durable, for every runner.

What every runner needs of a step lives here once: a step the owner chose to
skip is recorded as skipped; a step the journal already knows is replayed,
checked or asked about (persistence spec §7.3, `should_retry_step`) instead of
run blindly; a write waits for the owner's approval where the runner's rules
ask for one (step_questions.py), and runs only with exactly the arguments
approved; a credential the step needs parks the task on a prompt; a write's
intent is journaled before the tool runs; the tool runs with its idempotency key,
its credentials and a timeout (step_context.py); its result (redacted) is
journaled with the task's progress.

What a runner hands in and gets back is in step_call.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from ..errors import ResourceLocked, ToolError, ToolTimeout, VaultError
from ..hooks import HookPoint
from ..journal import Semantics, StepRecord, StepStatus, TaskRecord, TaskState
from ..journal.payloads import Executing, Paused, Payload, Synthesizing
from ..journal.question_kinds import QuestionKind
from ..journal.records import Idempotency, now_rfc3339
from ..timeouts import bounded
from ..tools.admin import PromptCredential
from ..tools.base import Tool, ToolContext, resources_of
from . import hooking, step_questions
from .asking import ask_owner, park_credential
from .services import Services
from .step_call import Done, Parked, StepCall, StepOutcome, StepRules, ToolErrored
from .step_context import idempotency, missing_secret, secret_prompt, tool_context
from .step_rules import StepRecovery, should_retry_step

__all__ = ["Done", "Parked", "StepCall", "StepOutcome", "StepRules", "ToolErrored", "run_step"]

IN_DOUBT_OPTIONS = ["retry", "skip", "fail"]


async def run_step(
    task: TaskRecord, call: StepCall, rules: StepRules, svc: Services, *, fresh: bool
) -> StepOutcome:
    """Run `call` for `task` (`fresh`: the task's last commit was its previous step's,
    so no record of this one can exist yet)."""
    i = call.step
    answered = task.payload if isinstance(task.payload, Executing) else Executing()
    if answered.skip_step == i:
        skipped = {"skipped": "by the owner's decision"}
        rec = _record(
            task, call, Semantics.Write, Idempotency.none, StepStatus.skipped, skipped, "Extracted"
        )
        return await _finish(task, call, svc, rec)

    if call.tool not in svc.tools:
        await ask_owner(
            task,
            svc,
            action_type=QuestionKind.tool_missing,
            step=i,
            tool=call.tool,
            options=["skip", "fail"],
            description=(
                f"Task {call.title} planned tool {call.tool!r} for {call.where}, but no "
                "such tool exists any more. Skip the step or fail the task?"
            ),
        )
        return Parked()
    tool = svc.tools.get(call.tool)
    # PreToolUse (seed 001, 4.4), before anything is asked or journaled about the call:
    # the owner is asked about, and the step runs, what the hooks left of it; the
    # verdict is kept, so a resumed step has the same arguments
    pre = await hooking.decide(
        svc,
        task.task_id,
        call.title,
        HookPoint.PreToolUse,
        f"step:{i}",
        {"tool": call.tool, "input": call.args, "where": call.where},
    )
    if pre.blocked:
        return _blocked(task, call, tool.semantics(call.args), pre.blocked)
    if "input" in pre.changes:
        call = replace(call, args=pre.changes["input"])
    semantics = tool.semantics(call.args)
    idem = idempotency(tool, call.args, rules)
    workdir = rules.workspace or svc.workspace(task.task_id)
    ctx = tool_context(task, call, rules, svc, workdir)

    record = None if fresh else await svc.journal.tasks.step(task.task_id, i)
    if record is not None and answered.retry_step != i:
        # Resuming at a step the journal already knows: spec §7.3.
        rule = should_retry_step(record, semantics, idem)
        if rule is StepRecovery.SkipWithCachedResult:
            return await _finish(task, call, svc, record)
        if rule is StepRecovery.CheckEffect:
            found = await tool.check(call.args, ctx)
            if found is not None:
                done = StepStatus.completed
                rec = _record(task, call, semantics, idem, done, found, tool.result_label)
                return await _finish(task, call, svc, rec)
        elif rule is StepRecovery.RequireOwnerConfirmation:
            await ask_owner(
                task,
                svc,
                action_type=QuestionKind.write_in_doubt,
                step=i,
                tool=call.tool,
                options=IN_DOUBT_OPTIONS,
                description=(
                    f"I was interrupted while executing '{call.tool}'. "
                    "It may have already completed. Should I retry it? "
                    f"(task {call.title}, {call.where})"
                ),
                preview=call.args,
            )
            return Parked()

    missing = missing_secret(ctx, call.tool, call.args)
    if missing is not None:
        # the template sends a secret the vault lacks: ask for it (AwaitingCredential,
        # re-sent after a restart); given, the step runs with it (asked
        # before any approval, so a grant is not spent on a call that cannot run)
        await park_credential(task, svc, i, secret_prompt(missing, call))
        return Parked()

    # a read is asked about only by a runner with questions of its own (the loop's)
    asks = rules.ask is not None or semantics is Semantics.Write
    question = (
        await step_questions.question(task, call, semantics, rules, answered, svc) if asks else None
    )
    if question is not None:
        hooked = await step_questions.permission(task, call, question.reason, svc)
        if hooked.blocked:
            return _blocked(task, call, semantics, hooked.blocked)
        if not hooked.allowed:
            ask = question.ask
            await ask_owner(
                task,
                svc,
                action_type=ask.action_type,
                step=i,
                tool=call.tool,
                options=list(ask.options),
                taint=question.taint,
                description=ask.description,
                preview=call.args,
                on_deny=ask.on_deny,
                timeout=ask.timeout,
            )
            return Parked()

    if isinstance(tool, PromptCredential) and await tool.check(call.args, ctx) is None:
        await park_credential(task, svc, i, call.args)
        return Parked()

    # the resource-lock seam (seed 001, 4.3): a runner that locks holds what the call
    # touches, in sorted order, from its start's journal entry to its result's
    if rules.hold is None:  # nothing to hold: no context to enter and leave on every step
        return await _run(task, call, rules, svc, tool, ctx, semantics, idem)
    try:
        async with rules.hold(f"{task.task_id}:{i}", resources_of(tool, call.args, ctx.workspace)):
            return await _run(task, call, rules, svc, tool, ctx, semantics, idem)
    except ResourceLocked as exc:  # its locks were not to be had: the call's result says so
        error = f"{call.where}: {exc}"
        failed = _record(
            task,
            call,
            semantics,
            idem,
            StepStatus.failed,
            None,
            "Extracted",
            started_at=now_rfc3339(),
            completed_at=now_rfc3339(),
            error=error,
        )
        return ToolErrored(failed, error, ran=False)


async def _run(
    task: TaskRecord,
    call: StepCall,
    rules: StepRules,
    svc: Services,
    tool: Tool,
    ctx: ToolContext,
    semantics: Semantics,
    idem: Idempotency,
) -> StepOutcome:
    """Journal a write's intent, run the tool under its timeout, journal what it did."""
    started = now_rfc3339()
    if semantics is Semantics.Write:
        label = tool.result_label
        await svc.journal.tasks.step_started(
            _record(
                task, call, semantics, idem, StepStatus.started, None, label, started_at=started
            )
        )
    seconds = rules.step_seconds
    try:
        tool.validate(call.args)
        result = await bounded(tool.run(call.args, ctx), seconds)
    except TimeoutError:
        error = f"{call.where}: {ToolTimeout(call.tool, seconds)}"
    except ToolError as exc:
        error = svc.redactor.text(f"{call.where}: {exc}")
    except (VaultError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a tool's bug fails its step, never the kernel
        error = svc.redactor.text(f"{call.where}: {call.tool} raised {exc!r}")
    else:
        if svc.hooks.wants(HookPoint.PostToolUse, call.tool):
            # a transformed result is what the step's row keeps: replayed, not re-asked
            after = await svc.hooks.fire(
                HookPoint.PostToolUse,
                {
                    "task_id": task.task_id,
                    "tool": call.tool,
                    "input": call.args,
                    "result": svc.redactor.value(result),
                    "started_at": started,
                },
            )
            result = after.changes.get("result", result)
        at = now_rfc3339()
        done = _record(
            task,
            call,
            semantics,
            idem,
            StepStatus.completed,
            svc.redactor.value(result),
            tool.result_label,
            started_at=started,
            completed_at=at,
        )
        return await _finish(task, call, svc, done, at=at)
    failed = _record(
        task,
        call,
        semantics,
        idem,
        StepStatus.failed,
        None,
        "Extracted",
        started_at=started,
        completed_at=now_rfc3339(),
        error=error,
    )
    return ToolErrored(failed, error)


async def _finish(
    task: TaskRecord, call: StepCall, svc: Services, rec: StepRecord, *, at: str | None = None
) -> Done:
    """Journal a step's outcome (completed, replayed, or skipped by the owner) with the
    task's progress; return the task as that commit left it. `at`: `rec` was made now,
    started and completed (a run's record); any other is stamped completed now."""
    if at is None:
        at = now_rfc3339()
        rec = replace(rec, started_at=rec.started_at or at, completed_at=at)
    # Synthesizing after the last step; Paused instead when the owner asked for a pause
    state = await svc.journal.tasks.step_finished(rec, next_step=call.next_step, last=call.last)
    return Done(_committed(task, call, state, at))


def _record(
    task: TaskRecord,
    call: StepCall,
    semantics: Semantics,
    idem: Idempotency,
    status: StepStatus,
    result: Any,
    label: str,
    *,
    started_at: str = "",
    completed_at: str | None = None,
    error: str | None = None,
) -> StepRecord:
    return StepRecord(
        task.task_id,
        call.step,
        call.tool,
        semantics,
        idem,
        status,
        call.args,
        result,
        label,
        started_at,
        completed_at,
        error,
    )


def _committed(task: TaskRecord, call: StepCall, state: TaskState, at: str) -> TaskRecord:
    """The task as the step's commit left it, without reading it back."""
    going_on: Executing | Synthesizing = (
        Synthesizing() if call.last else Executing(current_step=call.next_step)
    )
    payload: Payload = Paused(then=going_on) if state is TaskState.Paused else going_on
    progress = {"current_step": call.next_step, "last_completed": call.step, "last_step_at": at}
    return replace(
        task,
        state=state,
        phase=TaskState.Synthesizing.phase if call.last else task.phase,
        payload=payload,
        execute_progress=progress,
        recovery_attempts=0,
    )


def _blocked(task: TaskRecord, call: StepCall, semantics: Semantics, why: str) -> ToolErrored:
    """A call a hook stopped: it did not run, and its result says why."""
    at = now_rfc3339()
    error = f"{call.where}: did not run: {why}"
    failed = _record(
        task,
        call,
        semantics,
        Idempotency.none,
        StepStatus.failed,
        None,
        "Extracted",
        started_at="",  # it never started
        completed_at=at,
        error=error,
    )
    return ToolErrored(failed, error, ran=False)
