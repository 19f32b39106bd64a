"""What the owner is asked before a step runs: the runner's own question (the loop's
permission prompt) or the template's approval of a write, and what the permission
hooks make of it. Asked only once per approved run of the step, with exactly the
arguments the owner was shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..hooks import HookPoint, Verdict
from ..journal import Semantics, TaskRecord
from ..journal.payloads import Executing
from ..journal.records import args_digest
from ..policy.approvals import approval_needed
from . import hooking
from .services import Services
from .step_call import StepCall, StepRules
from .step_rules import Ask


@dataclass(frozen=True, slots=True)
class Question:
    """What the owner is asked before a call runs, what the permission hooks are told
    (`reason`), and the taint the question carries."""

    ask: Ask
    reason: str
    taint: str | None = None


async def question(
    task: TaskRecord,
    call: StepCall,
    semantics: Semantics,
    rules: StepRules,
    answered: Executing,
    svc: Services,
) -> Question | None:
    """The runner's own question when it has one (the loop's permission prompt), else the
    template's approval of a write; none once the owner approved this run of the step."""
    if _approved(answered, call.step, call.args):
        return None
    if rules.ask is not None:
        ask = rules.ask(call.tool, call.args, semantics)
        return None if ask is None else Question(ask, ask.description)
    if semantics is not Semantics.Write:
        return None
    labels = (
        [s.label for s in await svc.journal.tasks.steps(task.task_id) if s.step < call.step]
        if rules.approval.tainted_writes
        else []
    )
    need = approval_needed(rules.approval, call.tool, semantics, labels)
    if need is None:
        return None
    description = (
        f"Task {call.title} wants to run {call.tool} ({call.where}): "
        f"{need.reason}." + _carried(rules, call.tool)
    )
    ask = Ask(
        need.action_type,
        description,
        ("approve", "deny"),
        on_deny=rules.approval.on_deny,
        timeout=rules.approval_timeout,
    )
    return Question(ask, need.reason, need.taint_level)


async def permission(task: TaskRecord, call: StepCall, why: str, svc: Services) -> Verdict:
    """PermissionRequest (seed 001, 4.2): a handler may grant the call (no question), or
    deny it; a failed handler denies it (a security point fails closed)."""
    verdict = await hooking.decide(
        svc,
        task.task_id,
        call.title,
        HookPoint.PermissionRequest,
        f"step:{call.step}",
        {"tool": call.tool, "input": call.args, "where": call.where, "question": why},
    )
    about = {"task_id": task.task_id, "tool": call.tool, "input": call.args, "by": "hook"}
    if verdict.blocked:
        await hooking.observe(svc, HookPoint.PermissionDenied, {**about, "reason": verdict.blocked})
    elif verdict.allowed:
        await hooking.observe(svc, HookPoint.PermissionGranted, about)
    return verdict


def _approved(payload: Executing, i: int, args: dict[str, Any]) -> bool:
    """The owner's grant covers step `i` with exactly the arguments it was shown."""
    grant = payload.approved
    return grant is not None and grant.step == i and grant.args_sha256 == args_digest(args)


def _carried(rules: StepRules, tool: str) -> str:
    """What the runner adds to the call, so the owner approves all of it."""
    names = sorted({n for c in rules.credentials(tool) for n in c.secret_names()})
    return f" It carries the template's credentials: {', '.join(names)}." if names else ""
