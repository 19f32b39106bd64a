"""The pipeline runner: extract -> plan -> execute -> synthesize -> egress.

`advance(task_id)` is the only way a task moves: after a submit, after an
approval, after a crash. It reads the task from the journal, does the next
piece of work, journals its boundary, and repeats until the task finishes or
parks on the owner. Nothing is held in memory between calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from typing import Any, Literal

from ..errors import PfarError, ProviderError, ToolFailed, VaultError
from ..journal import (
    OwnerMessage,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from ..journal.message_keys import FailedKey, MessageKind, ResultKey
from ..journal.payloads import (
    Completed,
    Executing,
    Planning,
    Synthesizing,
)
from ..journal.question_kinds import QuestionKind
from ..llm.proxy import NeedsCloudRouting
from ..policy.approvals import ApprovalRule
from . import thinking
from .asking import ask_owner
from .plan import Plan
from .services import Services
from .spend_caps import SpendCapReached
from .spend_gate import ask_about_cap
from .step_rules import may_run_again, retry_hint
from .steps import Done, Parked, StepCall, StepRules, ToolErrored, run_step
from .templates import Template
from .thinking import Phase, PhaseInput

log = logging.getLogger("pfar.pipeline")

_EVERY_WRITE = ApprovalRule(require=frozenset({"*"}), tainted_writes=False, on_deny="fail")


async def advance(task_id: str, svc: Services) -> None:
    """Advance a task until it completes, fails, or parks. Safe to call at any time."""
    template_checked = False
    # After a move this call made itself (a phase's, a step's), the journal row is
    # exactly what it committed: it goes on from that mirror instead of reading the row.
    mirror: TaskRecord | None = None
    while True:
        task = mirror or await svc.journal.tasks.get(task_id)
        fresh, mirror = mirror is not None, None
        if not task.state.working:  # ended, parked on the owner, paused or being cancelled
            return
        try:
            if task.state is TaskState.Extracting:
                mirror = await _extract(task, svc)
            elif task.state is TaskState.Planning:
                # a plan made now was made under the template as it is on disk now
                mirror = await _plan(task, svc)
                template_checked = mirror is not None
            elif task.state is TaskState.Executing:
                if not template_checked:
                    template_checked = True
                    if not await _template_still_fits(task, svc):
                        return
                outcome = await _execute_step(task, svc, fresh=fresh)
                if outcome is False:
                    return
                if outcome is not True and outcome.state.working:
                    mirror = outcome  # Executing its next step, or Synthesizing
            elif task.state is TaskState.Synthesizing:
                if not (await _synthesize(task, svc)).working:
                    return  # Completed (or Paused at that boundary): nothing left to read
        except (VaultError, asyncio.CancelledError):
            raise
        except NeedsCloudRouting as exc:
            await ask_owner(
                task,
                svc,
                action_type=QuestionKind.cloud_routing,
                step=task.current_step,
                tool=None,
                options=["approve", "deny"],
                description=(
                    f"Task {task.template_id} ({task.task_id[:8]}) holds {exc.label!r} data, "
                    f"above the cloud ceiling {exc.ceiling!r}, and no local model is "
                    "configured. Send it to the cloud provider anyway?"
                ),
                resume_to=_thinking(task.state),
            )
            return
        except SpendCapReached as exc:
            title = f"{task.template_id} ({task.task_id[:8]})"
            await ask_about_cap(task, svc, exc, title=title, resume_to=_thinking(task.state))
            return
        except PfarError as exc:
            # a model call that failed after its retries may be retried by the owner; a
            # template, plan or hook that refused the task would refuse it again
            error = svc.redactor.text(str(exc))
            await _fail(task, svc, error, recoverable=isinstance(exc, ProviderError))
            return
        except Exception as exc:  # a bug must fail the task, not the kernel
            log.exception("task %s: unexpected error", task_id)
            await _fail(task, svc, svc.redactor.text(f"internal error: {exc!r}"), recoverable=False)
            return


# -- thinking phases ------------------------------------------------------------


async def _phase_input(task: TaskRecord, svc: Services, phase: Phase) -> PhaseInput:
    """What the phase is given; a call to a remote model is journaled before it goes out."""
    tpl = svc.templates.get(task.template_id)
    ask = PhaseInput(
        task_id=task.task_id,
        template_id=task.template_id,
        input_text=task.input_text,
        metadata=task.extracted_metadata or {},
        tools=list(tpl.allowed_tools) if tpl else [],
        data_label=task.data_ceiling,
        # the owner's say is looked up only for data the ceiling holds back
        cloud_approved=(
            not svc.model.routes_freely(task.data_ceiling) and await _cloud_approved(task, svc)
        ),
        priority=tpl.priority if tpl else 0,
        # The template's llm_seconds bounds each attempt of each model call, not the
        # phase: the retry table's waits (a 30 s overload wait) come on top of it, so a
        # documented retry is never cut short by the template's timeout. The phase as a
        # whole is bounded by [llm.retry] (how many attempts, how long between them).
        attempt_timeout=tpl.timeouts.llm_seconds if tpl else 120.0,
    )
    if svc.model.remote:
        await svc.journal.tasks.llm_request_sent(task.task_id, phase)
    return ask


async def _cloud_approved(task: TaskRecord, svc: Services) -> bool:
    """The owner's answer to a cloud_routing question is in the journal for good."""
    return any(
        a.action_type is QuestionKind.cloud_routing and a.status.value == "approved"
        for a in await svc.journal.questions.approvals_for_task(task.task_id)
    )


def _moved(
    task: TaskRecord, now: TaskState, to: Planning | Executing, **columns: Any
) -> TaskRecord | None:
    """The task as its move into `to` (with `columns` set) left the row, without reading
    it; None when the move landed elsewhere (Paused, at the owner's request): read it."""
    if now.value != to.kind:
        return None
    return replace(
        task, state=now, payload=to, phase=now.phase or task.phase, recovery_attempts=0, **columns
    )


async def _extract(task: TaskRecord, svc: Services) -> TaskRecord | None:
    meta = svc.redactor.value(
        await thinking.extract(await _phase_input(task, svc, "extract"), svc.model)
    )
    now = await svc.journal.tasks.transition(
        task.task_id,
        Planning(),
        point="extracted",
        update=TaskUpdate(extracted_metadata=meta),
    )
    return _moved(task, now, Planning(), extracted_metadata=meta)


async def _plan(task: TaskRecord, svc: Services) -> TaskRecord | None:
    """Plan the task; the task as planned when the plan was made now (under the
    template as it is now), else None."""
    if task.plan is not None:  # never re-plan: the journaled plan is the plan
        await svc.journal.tasks.transition(task.task_id, Executing(), point="planned")
        return None
    tpl = svc.templates.fresh(task.template_id)
    if tpl is None:
        raise ProviderError(f"template {task.template_id!r} no longer exists; cannot plan")
    if tpl.content_hash != task.template_hash:
        # nothing has run yet: plan under the template as it is now, and say so in the row
        await svc.journal.tasks.transition(
            task.task_id,
            Planning(),
            point=None,
            update=TaskUpdate(template_hash=tpl.content_hash),
        )
    ask = await _phase_input(task, svc, "plan")
    data = await thinking.plan(ask, svc.model, svc.tools)
    plan = Plan.parse(data, f"plan for task {task.task_id}")
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
    # a secret the model wrote into the plan is not journaled (use {{secret:NAME}})
    planned = TaskUpdate(
        plan=svc.redactor.value(plan.model_dump()), execute_progress={"current_step": 0}
    )
    now = await svc.journal.tasks.transition(
        task.task_id, Executing(), point="planned", update=planned
    )
    return _moved(
        task,
        now,
        Executing(),
        plan=planned.plan,
        execute_progress=planned.execute_progress,
        template_hash=tpl.content_hash,
    )


async def _synthesize(task: TaskRecord, svc: Services) -> TaskState:
    results = await svc.journal.tasks.step_results(task.task_id)
    ask = await _phase_input(task, svc, "synthesize")
    text = svc.redactor.text(await thinking.synthesize(ask, svc.model, results))
    messages: list[OwnerMessage] = []
    title = _title(task, svc)
    for sink in task.output_sinks:
        if sink == "owner":
            messages.append(
                OwnerMessage(
                    message_key=ResultKey(task.task_id),
                    kind=MessageKind.result,
                    task_id=task.task_id,
                    body=f"Task {title} ({task.task_id[:8]}) finished:\n{text}",
                )
            )
        elif sink.startswith("workspace:"):
            _write_result_file(svc, task, sink.removeprefix("workspace:"), text)
    state = await svc.journal.tasks.transition(
        task.task_id,
        Completed(),
        point="completed",
        update=TaskUpdate(execute_progress={"current_step": len(results), "result": text[:2000]}),
        messages=messages,
    )
    svc.notify_owner()
    return state


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
        action_type=QuestionKind.template_changed,
        step=task.current_step,
        tool=None,
        options=["continue", "fail"],
        description=(
            f"Task {_title(task, svc)} was running when {problem}. Continue with the plan "
            f"it already has (step {task.current_step + 1}), or fail it?"
        ),
        template_seen=current,
    )
    return False


async def _execute_step(task: TaskRecord, svc: Services, *, fresh: bool) -> bool | TaskRecord:
    """Run the task's next plan step (the step executor does the work).

    False when the task parked or ended; True to go on from the journal; the
    task as now committed when a step finished (`fresh`: then no record of its
    next step can exist yet).
    """
    plan_steps = task.plan_steps
    i = task.current_step
    if i >= len(plan_steps):
        await svc.journal.tasks.transition(task.task_id, Synthesizing(), point="synthesizing")
        return True
    # the plan was validated (as a Plan) when it was journaled; it is data from here on
    step = plan_steps[i]
    args = step.get("args")
    call = StepCall(
        i,
        str(step["tool"]),
        args if isinstance(args, dict) else {},
        _title(task, svc),
        f"step {i + 1} of {len(plan_steps)}",
        next_step=i + 1,
        last=i + 1 == len(plan_steps),
    )
    match await run_step(task, call, _rules(svc.templates.get(task.template_id)), svc, fresh=fresh):
        case Done(task=done):
            return done
        case Parked():
            return False
        case ToolErrored(record=rec, error=error, ran=ran):
            again = not ran or may_run_again(rec)  # a call that never ran repeats nothing
            message = _failure_message(task, svc, error, recoverable=again)
            await svc.journal.tasks.step_failed(rec, error, [message], recoverable=again)
            svc.notify_owner()
            return False


# each template's step rules, made once per loaded template (a reloaded template is a
# new object and gets its own): a step asks for them every time
_RULES: dict[str, tuple[Template, StepRules]] = {}


def _rules(tpl: Template | None) -> StepRules:
    """The template's rules for its steps. A task whose template is gone (the owner chose
    to go on with its plan) has none left to trust: every write it makes waits for the
    owner, and it carries no credentials."""
    if tpl is None:
        return StepRules(_EVERY_WRITE, step_seconds=60.0)
    made = _RULES.get(tpl.id)
    if made is None or made[0] is not tpl:
        made = _RULES[tpl.id] = (tpl, _made_rules(tpl))
    return made[1]


def _made_rules(tpl: Template) -> StepRules:
    return StepRules(
        tpl.approval_rule(),
        tpl.timeouts.step_seconds,
        frozenset(tpl.idempotency.trusted_key_hosts),
        tpl.bindings,
        tpl.approval.timeout_seconds,
    )


def _thinking(state: TaskState) -> Literal["Extracting", "Planning", "Synthesizing"]:
    """The thinking phase a cloud-routing question returns to."""
    if state is TaskState.Planning:
        return "Planning"
    return "Synthesizing" if state is TaskState.Synthesizing else "Extracting"


async def _fail(task: TaskRecord, svc: Services, error: str, *, recoverable: bool) -> None:
    current = await svc.journal.tasks.get(task.task_id)
    # held: the owner paused or is cancelling it, and a late write of this runner was
    # refused; the task is the owner's now, not this runner's to fail
    if current.state.terminal or current.state.held:
        return
    message = _failure_message(task, svc, error, recoverable=recoverable)
    await svc.journal.tasks.fail(task.task_id, error, [message], recoverable=recoverable)
    svc.notify_owner()


def _failure_message(
    task: TaskRecord, svc: Services, error: str, *, recoverable: bool
) -> OwnerMessage:
    hint = f"\n{retry_hint(task.task_id)}" if recoverable else ""
    return OwnerMessage(
        message_key=FailedKey(task.task_id),
        kind=MessageKind.notice,
        task_id=task.task_id,
        body=f"Task {_title(task, svc)} ({task.task_id[:8]}) failed: {error}{hint}",
    )


def _title(task: TaskRecord, svc: Services) -> str:
    tpl: Template | None = svc.templates.get(task.template_id)
    return tpl.title if tpl else task.template_id
