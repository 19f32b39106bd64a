"""How the owner's answers move a workflow task: the question its trace's state asks
(through the same persisted questions as approvals), the answer bound to that step and
that question, and the answer carried out on the trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ...answers import Abort, Answer, Back, Continue, Investigate, Rerun, Retry, Skip
from ...errors import AnswerDoesNotFit
from ...journal import ApprovalRecord, Move, TaskRecord, TaskUpdate
from ...journal.payloads import Executing, Failed, WorkflowAnswer
from ...journal.question_kinds import QuestionKind
from ..asking import ask_owner
from ..services import Services
from .recovery_check import OwnerOption, RecoveryDecision, TraceState
from .tasks import STEP_TOOL, WorkflowRun
from .trace import Trace
from .trace_edit import complete_step, update_step, write_trace_atomic


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
                question=str(approval.action_type),
                step=step,
                approval_id=approval.approval_id,
            )
            return Move(Executing(current_step=task.current_step, workflow_answer=bound))
        case _:
            raise AnswerDoesNotFit(approval.approval_id, answer.kind, approval.options)


def owner_option(task: TaskRecord, rd: RecoveryDecision) -> OwnerOption | None:
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


def apply_answer(option: OwnerOption, rd: RecoveryDecision, trace: Trace, run: WorkflowRun) -> int:
    """Carry out the owner's answer on the trace; the step to run next (the runner then
    records the resume). An abort never gets here: `answer_outcome` ends the task in the
    commit that records the answer."""
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
    return step


async def ask(
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


# the kind of question each state of the trace asks (stored as "workflow_{state}")
QUESTIONS: Final[Mapping[TraceState, QuestionKind]] = {
    TraceState.not_started: QuestionKind.workflow_not_started,
    TraceState.completed: QuestionKind.workflow_completed,
    TraceState.between_steps: QuestionKind.workflow_between_steps,
    TraceState.mid_step: QuestionKind.workflow_mid_step,
    TraceState.failed: QuestionKind.workflow_failed,
}


def _question(rd: RecoveryDecision) -> QuestionKind:
    """The kind of question the trace's state asks (an approval's action_type)."""
    return QUESTIONS[rd.state]
