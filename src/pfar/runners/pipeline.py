"""The pipeline runner: extract -> plan -> execute -> synthesize -> egress.

`advance(task_id)` is the only way a task moves: after a submit, after an
approval, after a crash. It reads the task from the journal, does the next
piece of work, journals its boundary, and repeats until the task finishes or
parks on the owner. Nothing is held in memory between calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from ..errors import PfarError, ProviderError, ToolError, ToolFailed, ToolTimeout, VaultError
from ..journal import (
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
)
from ..journal.records import Idempotency, args_digest, now_rfc3339
from ..llm.provider import LLMRequest, Phase
from ..llm.proxy import NeedsCloudRouting
from ..policy.approvals import ApprovalRule, approval_needed
from ..tools.admin import PromptCredential
from ..tools.base import Tool, ToolContext
from ..tools.processes import identity
from .asking import ask_owner, park_credential
from .plan import Plan, PlanStep
from .services import Services
from .step_rules import StepRecovery, should_retry_step
from .templates import Template

log = logging.getLogger("pfar.pipeline")

IN_DOUBT_OPTIONS = ["retry", "skip", "fail"]
_EVERY_WRITE = ApprovalRule(require=frozenset({"*"}), tainted_writes=False, on_deny="fail")


async def advance(task_id: str, svc: Services) -> None:
    """Advance a task until it completes, fails, or parks. Safe to call at any time."""
    template_checked = False
    # After a step this call completed itself, the journal row is exactly what it
    # committed: it goes on from that mirror instead of reading the row again.
    mirror: TaskRecord | None = None
    while True:
        task = mirror or svc.journal.task(task_id)
        fresh, mirror = mirror is not None, None
        if not task.state.working:  # ended, parked on the owner, paused or being cancelled
            return
        try:
            if task.state is TaskState.Extracting:
                await _extract(task, svc)
            elif task.state is TaskState.Planning:
                await _plan(task, svc)
            elif task.state is TaskState.Executing:
                if not template_checked:
                    template_checked = True
                    if not await _template_still_fits(task, svc):
                        return
                outcome = await _execute_step(task, svc, fresh=fresh)
                if outcome is False:
                    return
                if outcome is not True and outcome.state is TaskState.Executing:
                    mirror = outcome
            elif task.state is TaskState.Synthesizing:
                await _synthesize(task, svc)
        except (VaultError, asyncio.CancelledError):
            raise
        except NeedsCloudRouting as exc:
            await ask_owner(
                task,
                svc,
                action_type="cloud_routing",
                step=task.current_step,
                tool=None,
                options=["approve", "deny"],
                description=(
                    f"Task {task.template_id} ({task.task_id[:8]}) holds {exc.label!r} data, "
                    f"above the cloud ceiling {exc.ceiling!r}, and no local model is "
                    "configured. Send it to the cloud provider anyway?"
                ),
                extra_detail={"resume_state": task.state.value},
            )
            return
        except PfarError as exc:
            await _fail(task, svc, svc.redactor.text(str(exc)))
            return
        except Exception as exc:  # a bug must fail the task, not the kernel
            log.exception("task %s: unexpected error", task_id)
            await _fail(task, svc, svc.redactor.text(f"internal error: {exc!r}"))
            return


# -- thinking phases ------------------------------------------------------------


async def _think(task: TaskRecord, svc: Services, phase: Phase, **extra: Any) -> Any:
    tpl = svc.templates.get(task.template_id)
    req = LLMRequest(
        phase=phase,
        template_id=task.template_id,
        input_text=task.input_text,
        task_id=task.task_id,
        metadata=task.extracted_metadata or {},
        tools=list(tpl.allowed_tools) if tpl else [],
        data_label=task.data_ceiling,
        cloud_approved=_cloud_approved(task, svc),
        priority=tpl.priority if tpl else 0,
        # The template's llm_seconds bounds each attempt of each model call, not the
        # phase: the retry table's waits (a 30 s overload wait) come on top of it, so a
        # documented retry is never cut short by the template's timeout. The phase as a
        # whole is bounded by [llm.retry] (how many attempts, how long between them).
        attempt_timeout=tpl.timeouts.llm_seconds if tpl else 120.0,
        **extra,
    )
    if getattr(svc.provider, "remote", False):  # a model call: journaled before it goes out
        await svc.journal.llm_request_sent(task.task_id, phase)
    return await svc.provider.complete(req)


def _cloud_approved(task: TaskRecord, svc: Services) -> bool:
    """The owner's answer to a cloud_routing question is in the journal for good."""
    return any(
        a.action_type == "cloud_routing" and a.status.value == "approved"
        for a in svc.journal.approvals_for_task(task.task_id)
    )


async def _extract(task: TaskRecord, svc: Services) -> None:
    resp = await _think(task, svc, "extract")
    meta = svc.redactor.value(resp.data if resp.data is not None else {"text": resp.text or ""})
    await svc.journal.transition(
        task.task_id, TaskState.Planning, point="extracted", extracted_metadata=meta
    )


async def _plan(task: TaskRecord, svc: Services) -> None:
    if task.plan is not None:  # never re-plan: the journaled plan is the plan
        await svc.journal.transition(
            task.task_id, TaskState.Executing, point="planned", detail={"current_step": 0}
        )
        return
    tpl = svc.templates.fresh(task.template_id)
    if tpl is None:
        raise ProviderError(f"template {task.template_id!r} no longer exists; cannot plan")
    if tpl.content_hash != task.template_hash:
        # nothing has run yet: plan under the template as it is now, and say so in the row
        await svc.journal.transition(
            task.task_id, TaskState.Planning, point=None, template_hash=tpl.content_hash
        )
    resp = await _think(task, svc, "plan")
    plan = Plan.parse(resp.data, f"plan for task {task.task_id}")
    for i, step in enumerate(plan.steps):
        if step.tool not in tpl.allowed_tools:
            raise ProviderError(
                f"plan step {i + 1} uses tool {step.tool!r}, which template {tpl.id!r} "
                f"does not allow (allowed_tools = {tpl.allowed_tools})"
            )
        if step.tool not in svc.tools:
            raise ProviderError(f"plan step {i + 1} uses unknown tool {step.tool!r}")
        tool = svc.tools.get(step.tool)
        try:
            tool.validate(step.args)
        except ToolFailed as exc:
            raise ProviderError(f"plan step {i + 1}: {exc}") from None
    await svc.journal.transition(
        task.task_id,
        TaskState.Executing,
        point="planned",
        detail={"current_step": 0},
        # a secret the model wrote into the plan is not journaled (use {{secret:NAME}})
        plan_json=svc.redactor.value(plan.model_dump()),
        execute_progress={"current_step": 0},
    )


async def _synthesize(task: TaskRecord, svc: Services) -> None:
    steps = svc.journal.steps(task.task_id)
    results = [s.result for s in steps]
    resp = await _think(task, svc, "synthesize", step_results=results)
    text = svc.redactor.text(resp.text if resp.text is not None else json.dumps(resp.data))
    messages: list[OwnerMessage] = []
    title = _title(task, svc)
    for sink in task.output_sinks:
        if sink == "owner":
            messages.append(
                OwnerMessage(
                    message_key=f"result:{task.task_id}",
                    kind="result",
                    task_id=task.task_id,
                    body=f"Task {title} ({task.task_id[:8]}) finished:\n{text}",
                )
            )
        elif sink.startswith("workspace:"):
            _write_result_file(svc, task, sink.removeprefix("workspace:"), text)
    await svc.journal.transition(
        task.task_id,
        TaskState.Completed,
        point="completed",
        messages=messages,
        execute_progress={"current_step": len(steps), "result": text[:2000]},
    )
    svc.notify_owner()


def _write_result_file(svc: Services, task: TaskRecord, name: str, text: str) -> None:
    root = svc.workspace(task.task_id)
    target = (root / name).resolve()
    if root.resolve() not in target.parents:
        raise ToolFailed(f"output sink workspace:{name} is outside the task workspace")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)


# -- execute ----------------------------------------------------------------


async def _template_still_fits(task: TaskRecord, svc: Services) -> bool:
    """A template edited or removed under a running task: ask the owner, don't guess."""
    try:
        tpl = svc.templates.fresh(task.template_id)
    except PfarError as exc:
        tpl, problem = None, f"its template no longer loads ({exc})"
    else:
        problem = "its template was removed" if tpl is None else "its template changed"
    current = tpl.content_hash if tpl else "missing"
    if current == task.template_hash:
        return True
    await ask_owner(
        task,
        svc,
        action_type="template_changed",
        step=task.current_step,
        tool=None,
        options=["continue", "fail"],
        description=(
            f"Task {_title(task, svc)} was running when {problem}. Continue with the plan "
            f"it already has (step {task.current_step + 1}), or fail it?"
        ),
        extra_detail={"template_seen": current},
    )
    return False


async def _execute_step(task: TaskRecord, svc: Services, *, fresh: bool) -> bool | TaskRecord:
    """Run the task's next step.

    False when the task parked or ended; True to go on from the journal; the
    task as now committed when a step finished (`fresh`: then no record of its
    next step can exist yet).
    """
    plan_steps = (task.plan or {}).get("steps", [])
    i = task.current_step
    if i >= len(plan_steps):
        await svc.journal.transition(task.task_id, TaskState.Synthesizing, point="synthesizing")
        return True
    # the plan was validated when it was journaled; it is data from here on
    step = PlanStep.model_construct(**plan_steps[i])
    record = None if fresh else svc.journal.step(task.task_id, i)
    where = f"step {i + 1} of {len(plan_steps)}"

    if task.detail.get("skip_step") == i:
        return await _finish(
            svc,
            task,
            i,
            step.tool,
            step.args,
            Semantics.Write,
            Idempotency.none,
            StepStatus.skipped,
            {"skipped": "by the owner's decision"},
            "Extracted",
        )

    if step.tool not in svc.tools:
        await ask_owner(
            task,
            svc,
            action_type="tool_missing",
            step=i,
            tool=step.tool,
            options=["skip", "fail"],
            description=(
                f"Task {_title(task, svc)} planned tool {step.tool!r} for "
                f"{where}, but no such tool exists any more. Skip the step or "
                "fail the task?"
            ),
        )
        return False
    tool = svc.tools.get(step.tool)
    semantics = tool.semantics(step.args)
    tpl = svc.templates.get(task.template_id)
    idem = _idempotency(tool, step.args, tpl)
    ctx = ToolContext(
        task.task_id,
        i,
        f"{task.task_id}:{i}",
        svc.workspace(task.task_id),
        svc.secret,
        _process_recorder(svc, task.task_id, i),
        # a task whose template is gone keeps its plan but loses its credentials
        credentials=tpl.bindings(step.tool) if tpl else (),
    )

    if record is not None and task.detail.get("retry_step") != i:
        # Resuming at a step the journal already knows: spec §7.3.
        rule = should_retry_step(record, semantics, idem)
        if rule is StepRecovery.SkipWithCachedResult:
            return await _finish(
                svc,
                task,
                i,
                record.tool,
                record.args,
                record.semantics,
                record.idempotency,
                record.status,
                record.result,
                record.label,
                record.started_at,
            )
        if rule is StepRecovery.CheckEffect:
            found = await tool.check(step.args, ctx)
            if found is not None:
                return await _finish(
                    svc,
                    task,
                    i,
                    step.tool,
                    step.args,
                    semantics,
                    idem,
                    StepStatus.completed,
                    found,
                    tool.result_label,
                )
        elif rule is StepRecovery.RequireOwnerConfirmation:
            await ask_owner(
                task,
                svc,
                action_type="write_in_doubt",
                step=i,
                tool=step.tool,
                options=IN_DOUBT_OPTIONS,
                description=(
                    f"I was interrupted while executing '{step.tool}'. "
                    "It may have already completed. Should I retry it? "
                    f"(task {_title(task, svc)}, {where})"
                ),
                preview=step.args,
            )
            return False

    if semantics is Semantics.Write and not _approved(task, i, step.args):
        # A task whose template is gone (the owner chose to go on with its plan) has no
        # rules left to trust: every write it makes waits for the owner.
        approval_rule = tpl.approval_rule() if tpl else _EVERY_WRITE
        labels = (
            [s.label for s in svc.journal.steps(task.task_id) if s.step < i]
            if approval_rule.tainted_writes
            else []
        )
        need = approval_needed(approval_rule, step.tool, semantics, labels)
        if need is not None:
            await ask_owner(
                task,
                svc,
                action_type=need.action_type,
                step=i,
                tool=step.tool,
                options=["approve", "deny"],
                taint=need.taint_level,
                description=(
                    f"Task {_title(task, svc)} wants to run {step.tool} ({where}): {need.reason}."
                    + _carried(tpl, step.tool)
                ),
                preview=step.args,
                on_deny=approval_rule.on_deny,
                timeout=tpl.approval.timeout_seconds if tpl else None,
            )
            return False

    if isinstance(tool, PromptCredential) and await tool.check(step.args, ctx) is None:
        await park_credential(task, svc, i, step.args)
        return False

    started = now_rfc3339()
    if semantics is Semantics.Write:
        await svc.journal.step_started(
            StepRecord(
                task.task_id,
                i,
                step.tool,
                semantics,
                idem,
                StepStatus.started,
                step.args,
                None,
                tool.result_label,
                started,
                None,
                None,
            )
        )
    seconds = tpl.timeouts.step_seconds if tpl else 60.0
    try:
        async with asyncio.timeout(seconds):
            result = await _call(tool, step.args, ctx)
    except TimeoutError:
        err: ToolError = ToolTimeout(step.tool, seconds)
        await _step_failed(svc, task, i, step, semantics, idem, started, f"{where}: {err}")
        return False
    except ToolError as exc:
        await _step_failed(
            svc, task, i, step, semantics, idem, started, svc.redactor.text(f"{where}: {exc}")
        )
        return False
    except (VaultError, asyncio.CancelledError):
        raise
    except Exception as exc:
        await _step_failed(
            svc,
            task,
            i,
            step,
            semantics,
            idem,
            started,
            svc.redactor.text(f"{where}: {step.tool} raised {exc!r}"),
        )
        return False
    return await _finish(
        svc,
        task,
        i,
        step.tool,
        step.args,
        semantics,
        idem,
        StepStatus.completed,
        svc.redactor.value(result),
        tool.result_label,
        started,
    )


def _approved(task: TaskRecord, i: int, args: dict[str, Any]) -> bool:
    """The owner's grant covers step `i` with exactly the arguments it was shown."""
    return task.detail.get("approved_step") == i and task.detail.get(
        "approved_args"
    ) == args_digest(args)


def _carried(tpl: Template | None, tool: str) -> str:
    """What the template adds to the call, so the owner approves all of it."""
    names = sorted({n for c in (tpl.bindings(tool) if tpl else ()) for n in c.secret_names()})
    return f" It carries the template's credentials: {', '.join(names)}." if names else ""


def _process_recorder(svc: Services, task_id: str, step: int) -> Callable[[int], Awaitable[None]]:
    async def record(pid: int) -> None:
        process = identity(pid)
        if process is not None:
            await svc.journal.step_process(task_id, step, process)

    return record


def _idempotency(tool: Tool, args: dict[str, Any], tpl: Template | None) -> Idempotency:
    idem = tool.idempotency(args)
    if idem is Idempotency.none and getattr(tool, "sends_idempotency_key", False) and tpl:
        host = urlsplit(str(args.get("url", ""))).netloc.lower()
        if host and host in {h.lower() for h in tpl.idempotency.trusted_key_hosts}:
            return Idempotency.key
    return idem


async def _call(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
    tool.validate(args)
    return await tool.run(args, ctx)


async def _finish(
    svc: Services,
    task: TaskRecord,
    i: int,
    tool: str,
    args: dict[str, Any],
    semantics: Semantics,
    idem: Idempotency,
    status: StepStatus,
    result: Any,
    label: str,
    started: str | None = None,
) -> TaskRecord:
    """Journal a step's outcome; return the task as it now stands in the journal."""
    at = now_rfc3339()
    last = i + 1 == len((task.plan or {}).get("steps", []))
    # Synthesizing after the last step; Paused instead when the owner asked for a pause
    state = await svc.journal.step_finished(
        StepRecord(
            task.task_id,
            i,
            tool,
            semantics,
            idem,
            status,
            args,
            result,
            label,
            started or at,
            at,
            None,
        ),
        next_step=i + 1,
        last=last,
    )
    return dataclasses.replace(
        task,
        state=state,
        phase=TaskState.Synthesizing.phase if last else task.phase,
        detail={"current_step": i + 1},
        execute_progress={"current_step": i + 1, "last_completed": i, "last_step_at": at},
        recovery_attempts=0,
    )


async def _step_failed(
    svc: Services,
    task: TaskRecord,
    i: int,
    step: Any,
    semantics: Semantics,
    idem: Idempotency,
    started: str,
    error: str,
) -> None:
    rec = StepRecord(
        task.task_id,
        i,
        step.tool,
        semantics,
        idem,
        StepStatus.failed,
        step.args,
        None,
        "Extracted",
        started,
        now_rfc3339(),
        error,
    )
    await svc.journal.step_failed(rec, error, [_failure_message(task, svc, error)])
    svc.notify_owner()


async def _fail(task: TaskRecord, svc: Services, error: str) -> None:
    current = svc.journal.task(task.task_id)
    # held: the owner paused or is cancelling it, and a late write of this runner was
    # refused; the task is the owner's now, not this runner's to fail
    if current.state.terminal or current.state.held:
        return
    await svc.journal.fail(task.task_id, error, [_failure_message(task, svc, error)])
    svc.notify_owner()


def _failure_message(task: TaskRecord, svc: Services, error: str) -> OwnerMessage:
    return OwnerMessage(
        message_key=f"failed:{task.task_id}",
        kind="notice",
        task_id=task.task_id,
        body=f"Task {_title(task, svc)} ({task.task_id[:8]}) failed: {error}",
    )


def _title(task: TaskRecord, svc: Services) -> str:
    tpl: Template | None = svc.templates.get(task.template_id)
    return tpl.title if tpl else task.template_id
