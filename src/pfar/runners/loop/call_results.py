"""What the model is told about a resolved tool call: the truth the journal holds, with
what it must know besides (a run a crash cut off, why the owner's answer left it unrun)."""

from __future__ import annotations

import json
from typing import Any

from ...errors import PfarError
from ...hooks import HookPoint, Verdict
from ...journal import StepStatus, TaskRecord
from ...journal.question_kinds import QuestionKind
from ...journal.turns import LoopCall, LoopResult
from ..services import Services


async def result_of(task: TaskRecord, call: LoopCall, svc: Services) -> LoopResult:
    """What the model is told about a resolved call: the truth the journal holds."""
    rec = await svc.journal.tasks.step(task.task_id, call.step)
    if rec is None:  # cannot happen: every resolved call has its row
        raise PfarError(f"task {task.task_id}: tool call {call.step + 1} has no record")
    if rec.status is StepStatus.completed:
        text = await _retried(task, call, svc) + _text(rec.result)
        if svc.hooks.wants(HookPoint.PreToolUse, call.name):
            kept = await svc.journal.tasks.hook_verdict(
                task.task_id, f"{HookPoint.PreToolUse}:step:{call.step}"
            )
            if kept and (context := Verdict.from_json(kept).context):
                text += "\n\n" + "\n".join(context)
        return LoopResult(call_id=call.id, step=call.step, content=text)
    if rec.status is StepStatus.failed:
        text = await _retried(task, call, svc) + (rec.error or "failed")
        return LoopResult(call_id=call.id, step=call.step, content=text, is_error=True)
    return LoopResult(
        call_id=call.id, step=call.step, content=await _skipped(task, call, svc), is_error=True
    )


async def _retried(task: TaskRecord, call: LoopCall, svc: Services) -> str:
    """What the model must know before a retried call's output: the runs a crash cut
    off, which may have had their effect too (a command run twice appends twice)."""
    retries = sum(
        1
        for a in await svc.journal.questions.approvals_for_task(task.task_id)
        if a.step == call.step
        and a.action_type is QuestionKind.write_in_doubt
        and a.decision == "retry"
    )
    if not retries:
        return ""
    runs = "an earlier run was" if retries == 1 else f"{retries} earlier runs were"
    return (
        f"Note: {runs} cut off by a crash before pfar knew whether it finished: it may "
        "have had its effect (in part or in full). The owner chose to run the call again; "
        "what follows is the output of that last run only. Check for effects done twice "
        "before relying on them.\n\n"
    )


async def _skipped(task: TaskRecord, call: LoopCall, svc: Services) -> str:
    """Why the owner's answer left a call unrun, from the question it answered."""
    asked = [
        a
        for a in await svc.journal.questions.approvals_for_task(task.task_id)
        if a.step == call.step and a.decision is not None
    ]
    last = asked[-1] if asked else None
    if last is not None and last.action_type is QuestionKind.write_in_doubt:
        return (
            "This call was cut off by a crash before pfar knew whether it ran: it may or "
            "may not have had its effect. The owner chose not to run it again. Check its "
            "effect before relying on it."
        )
    if last is not None and last.action_type is QuestionKind.permission:
        if last.status.value == "expired":
            return "Permission was not given (no answer from the owner in time); it did not run."
        if last.decision == "never":
            return "The owner denied permission, now and for later calls like it; it did not run."
        return "The owner denied permission for this call; it did not run."
    return "The owner chose to skip this call; it did not run."


def _text(result: Any) -> str:
    if isinstance(result, dict) and isinstance(text := result.get("text"), str):
        return text
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, sort_keys=True)
