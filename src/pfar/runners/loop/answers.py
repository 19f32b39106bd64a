"""How the owner's answers move a loop task: its permission prompts, its drift
question, and the step executor's own questions (a call in doubt, a tool gone)."""

from __future__ import annotations

import json
from typing import Any

from ...answers import Always, Answer, Approve, Deny, Never
from ...errors import AnswerDoesNotFit, TaskStateRefused
from ...journal import ApprovalRecord, Move, TaskRecord
from ...journal.payloads import AwaitingApproval, Executing, Grant
from ...journal.question_kinds import QuestionKind
from .. import asking
from .permissions import remembered


def apply_answer(task: TaskRecord, approval: ApprovalRecord, answer: Answer) -> Move:
    """Where the owner's answer sends a loop task parked on `approval` (inside the
    decision's commit). A permission's "always" and "never" are kept in that commit."""
    parked = task.payload
    if not isinstance(parked, AwaitingApproval):
        raise TaskStateRefused(task.task_id, task.state.value, "answered", "it asks nothing")
    step = approval.step if approval.step is not None else parked.step
    if approval.action_type is QuestionKind.permission:
        args = _shown_args(approval)
        tool = approval.tool or ""
        match answer:
            case Approve() | Always():
                granted = Grant(step=step, args_sha256=approval.args_sha256)
                rule = (
                    remembered(tool, args, "allow", task.task_id)
                    if isinstance(answer, Always)
                    else None
                )
                return Move(
                    Executing(current_step=step, approved=granted, retry_step=step),
                    remember=rule,
                )
            case Deny() | Never():
                rule = (
                    remembered(tool, args, "deny", task.task_id)
                    if isinstance(answer, Never)
                    else None
                )
                return Move(Executing(current_step=step, skip_step=step), remember=rule)
            case _:
                raise AnswerDoesNotFit(approval.approval_id, answer.kind, approval.options)
    # drift ("continue" / "fail"), a call in doubt ("retry" / "skip" / "fail"), a tool
    # that is gone: the step executor's answers, as the pipeline applies them
    return asking.answer_outcome(task, approval, answer)


def _shown_args(approval: ApprovalRecord) -> dict[str, Any]:
    """The arguments the owner was shown (their redacted JSON): what a kept answer covers."""
    try:
        shown = json.loads(approval.data_preview or "{}")
    except ValueError:
        return {}
    return shown if isinstance(shown, dict) else {}
