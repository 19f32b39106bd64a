"""The tool calls of a loop task's answer, each through the layers and the step
executor: layer 1 (the policy, as the SecurityPolicyCheck hook leaves it), a standing
"never", layer 3 (anomalies), then the step executor, which asks layer 2's question.
A refusal or a tool's error is the call's result, not the task's failure. Once every
call is resolved, their results are appended as one turn."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import ToolFailed
from ...hooks import HookPoint
from ...journal import StepRecord, StepStatus, TaskRecord, TaskState
from ...journal.payloads import Executing, Paused
from ...journal.records import Idempotency, Semantics, now_rfc3339
from ...journal.turns import (
    AssistantTurn,
    LoopCall,
    LoopSettings,
    PermissionRule,
    ResultsTurn,
    StoredTurn,
)
from ...llm.messages import StopReason
from ...policy.approvals import ApprovalRule
from ...tools.mcp import is_mcp
from .. import hooking
from ..services import Services
from ..step_rules import Ask
from ..steps import Done, Parked, StepCall, StepRules, ToolErrored, run_step
from . import anomalies, call_results, drift, redirects, routing, subtasks, taint
from .permissions import Policy

_NO_APPROVALS = ApprovalRule(require=frozenset(), tainted_writes=False, on_deny="skip")


async def tool_phase(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    turn: AssistantTurn,
    svc: Services,
) -> bool:
    """Run every call of `turn` not yet resolved, in order; then append their results."""
    policy = svc.loop_policy or Policy.of(svc.loop)
    workdir = Path(settings.working_dir)
    for call in turn.calls:
        if call.step < task.current_step:
            continue  # resolved: its row holds its outcome
        after = await _run_call(task, settings, call, policy, workdir, svc, convo)
        if after is None:
            return False
        task = after
        if task.state is not TaskState.Executing:
            return False  # paused at this call's end, or moved by the owner meanwhile
    results = [await call_results.result_of(task, call, svc) for call in turn.calls]
    notes = []
    if turn.unusable:
        notes.append(routing.unusable_note(turn))
    if turn.stop_reason in (StopReason.max_tokens.value, StopReason.partial.value):
        notes.append(routing.CONTINUE)
    stored, _ = await svc.journal.loops.append(
        task.task_id,
        [ResultsTurn(results=tuple(results), note="\n\n".join(notes))],
        after=convo[-1].seq,
        point="tool_results",
    )
    convo.extend(stored)
    await drift.observe_iteration(task, convo, svc)
    return True


async def _run_call(
    task: TaskRecord,
    settings: LoopSettings,
    call: LoopCall,
    policy: Policy,
    workdir: Path,
    svc: Services,
    convo: Sequence[StoredTurn] = (),
) -> TaskRecord | None:
    """One call through the layers and the step executor: the task as it is after the
    call's outcome was journaled, or None when it parked on the owner."""
    where = f"tool call {call.step + 1}"
    title = settings.title or task.task_id[:8]
    step_key = f"step:{call.step}"
    if call.name == subtasks.TASK and subtasks.TASK in svc.loop.tools:
        refusal = subtasks.refusal(call, settings, svc) or await _policy(
            task, title, call, policy, workdir, svc
        )
        if refusal is None:
            spawned = await hooking.decide(
                svc,
                task.task_id,
                title,
                HookPoint.SubtaskSpawned,
                step_key,
                {"parent_task_id": task.task_id, "depth": settings.depth + 1, "input": call.input},
            )
            refusal = spawned.blocked
        if refusal is not None:
            return await _record_refusal(task, call, refusal, svc)
        await subtasks.spawn(task, settings, call, svc)
        return None  # blocked on its subtask: woken when that ends
    unusable = _unusable(call, svc)
    if unusable is not None and await _cut_off_mcp(task, call, svc):
        # an MCP tool's write cut off by a crash, its server not running now: the step
        # executor asks the owner (the tool is missing, or its write is in doubt)
        rules = StepRules(_NO_APPROVALS, svc.loop.tool_seconds, workspace=workdir)
        return await _step(task, call, rules, title, where, svc)
    refusal = unusable or await _policy(task, title, call, policy, workdir, svc)
    if refusal is None and await _never(call, policy, svc):
        refusal = (
            f'The owner never allows {call.name} on this (a standing "never allow" '
            "answer); it did not run"
        )
    if refusal is not None:
        return await _record_refusal(task, call, refusal, svc)
    semantics = svc.tools.get(call.name).semantics(call.input)
    unusual = await anomalies.check(task, settings, call, semantics, svc)
    if unusual:
        flagged = await hooking.decide(
            svc,
            task.task_id,
            title,
            HookPoint.AnomalyDetected,
            step_key,
            {
                "tool": call.name,
                "input": call.input,
                "anomalies": [{"kind": a.kind, "detail": a.detail} for a in unusual],
            },
        )
        if flagged.blocked:
            return await _record_refusal(task, call, flagged.blocked, svc)
    ask_anyway = unusual if svc.loop.anomaly.action == "ask" else ()
    protection = policy.protection
    if policy.path_refusal(call.input, workdir) is not None:
        # a SecurityPolicyCheck hook overruled layer 1: the owner's patterns give way
        # for this call, pfar's built-in protected paths do not
        protection = protection.built_in_only()
    tainted = await taint.tainted_by(task, convo, call.step, svc) if policy.tainted_writes else None
    rules = StepRules(
        _NO_APPROVALS,
        svc.loop.tool_seconds,
        ask=_asker(
            policy,
            await svc.journal.loops.rules(),
            ask_anyway,
            tainted,
            getattr(svc.tools.get(call.name), "asks", None),
        ),
        workspace=workdir,
        hold=svc.hold,
        protection=protection,
        hosts=policy.hosts,
        redirected=redirects.judge(task, settings, call, policy, workdir, svc),
        skills=settings.skills,
    )
    return await _step(task, call, rules, title, where, svc)


async def _step(
    task: TaskRecord, call: LoopCall, rules: StepRules, title: str, where: str, svc: Services
) -> TaskRecord | None:
    step = StepCall(call.step, call.name, call.input, title, where, call.step + 1, last=False)
    match await run_step(task, step, rules, svc, fresh=False):
        case Done(task=done):
            return done
        case Parked():
            return None
        case ToolErrored(record=rec):
            state = await svc.journal.tasks.step_finished(rec, next_step=call.step + 1)
            return dataclasses.replace(task, state=state, payload=_after(state, call.step + 1))


def _after(state: TaskState, next_step: int) -> Executing | Paused:
    going = Executing(current_step=next_step)
    return Paused(then=going) if state is TaskState.Paused else going


def _asker(
    policy: Policy,
    rules: Sequence[PermissionRule],
    unusual: Sequence[anomalies.Anomaly] = (),
    tainted: str | None = None,
    asks: bool | None = None,
) -> Callable[[str, dict[str, Any], Semantics], Ask | None]:
    """Layer 2's question for a call; an unusual call (layer 3, `action = "ask"`) is
    asked about even when a tool or a standing answer would let it run, and so is a
    write after outside data (`tainted`: taint.py). `asks`: the tool's own rule (an MCP
    tool's: permissions.Policy.ask)."""

    def ask(tool: str, args: dict[str, Any], semantics: Semantics) -> Ask | None:
        if unusual:
            return policy.ask_unusual(tool, args, [a.detail for a in unusual])
        return policy.ask(rules, tool, args, semantics, tainted, asks)

    return ask


def _unusable(call: LoopCall, svc: Services) -> str | None:
    """Why a call cannot run at all: an unknown tool, or arguments its schema refuses.
    Each is the call's result; the model may try again."""
    mcp = svc.mcp.offered() if svc.mcp is not None else []
    if (call.name not in svc.loop.tools and call.name not in mcp) or call.name not in svc.tools:
        offered = ", ".join(
            [n for n in svc.loop.tools if n in svc.tools or n == subtasks.TASK] + mcp
        )
        return f"Unknown tool: {call.name} (the tools are: {offered})"
    try:
        svc.tools.get(call.name).validate(call.input)
    except ToolFailed as exc:
        return f"Invalid parameters: {exc}"
    return None


async def _cut_off_mcp(task: TaskRecord, call: LoopCall, svc: Services) -> bool:
    """A call of an MCP tool whose write the journal has as started, not finished."""
    if svc.mcp is None or not is_mcp(call.name):
        return False
    known = await svc.journal.tasks.step(task.task_id, call.step)
    return known is not None and known.status is StepStatus.started


async def _policy(
    task: TaskRecord, title: str, call: LoopCall, policy: Policy, workdir: Path, svc: Services
) -> str | None:
    """Layer 1 (seed 001, 4.1): the policy's refusal, as the SecurityPolicyCheck hook
    leaves it (a handler may add a check, or overrule the policy); a refusal is a
    SecurityViolation."""
    # off the event loop: parsing a long command costs about a microsecond a character
    refusal = await asyncio.to_thread(
        policy.refusal, call.name, call.input, workdir
    ) or await policy.url_refusal(call.input)
    checked = await hooking.decide(
        svc,
        task.task_id,
        title,
        HookPoint.SecurityPolicyCheck,
        f"step:{call.step}",
        {"tool": call.name, "input": call.input, "policy_refusal": refusal},
    )
    if checked.blocked:
        refusal = checked.blocked
    elif checked.allowed:
        refusal = None
    if refusal is not None:
        await hooking.observe(
            svc,
            HookPoint.SecurityViolation,
            {"task_id": task.task_id, "tool": call.name, "input": call.input, "reason": refusal},
        )
    return refusal


async def _never(call: LoopCall, policy: Policy, svc: Services) -> bool:
    return policy.standing(await svc.journal.loops.rules(), call.name, call.input) == "deny"


async def _record_refusal(task: TaskRecord, call: LoopCall, why: str, svc: Services) -> TaskRecord:
    known = await svc.journal.tasks.step(task.task_id, call.step)
    if known is None:  # one row per call: the steps stay numbered without a gap
        at = now_rfc3339()
        rec = StepRecord(
            task.task_id,
            call.step,
            call.name,
            Semantics.Read,
            Idempotency.none,
            StepStatus.failed,
            call.input,
            None,
            "Extracted",
            at,
            at,
            why,
        )
        state = await svc.journal.tasks.step_finished(rec, next_step=call.step + 1)
    else:
        state = await svc.journal.tasks.step_finished(known, next_step=call.step + 1)
    return dataclasses.replace(task, state=state, payload=_after(state, call.step + 1))
