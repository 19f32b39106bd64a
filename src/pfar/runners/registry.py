"""Which runner advances a task: its row's `kind` says, and this table answers.

Each runner owns what its states mean, how the owner's answers apply to it, and
the part of recovery's decision that is its own. The kernel and recovery ask
the table, never an id prefix or a template name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..answers import Answer
from ..journal import ApprovalRecord, Move, StepRecord, StepStatus, TaskKind, TaskRecord, TaskState
from ..journal.payloads import Executing
from . import asking, pipeline
from .services import Services
from .step_rules import StepRecovery, should_retry_step
from .workflow import runner as workflow


@dataclass(frozen=True, slots=True)
class Runner:
    kind: TaskKind
    # advance the task from the journal until it ends, parks or is held
    advance: Callable[[str, Services], Awaitable[None]]
    # where the owner's answer to one of its questions sends it (inside the answer's commit)
    apply_answer: Callable[[TaskRecord, ApprovalRecord, Answer], Move]
    # recovery abandons it once it has been idle past the max age (a workflow's steps
    # may run for hours: its trace decides instead)
    ages_out: bool
    # recovery: whether its step in flight is a write the owner must be asked about
    write_in_doubt: Callable[[TaskRecord, StepRecord], bool]


def _pipeline_in_doubt(task: TaskRecord, step: StepRecord) -> bool:
    """The pipeline's own rule (should_retry_step) on what the journal recorded when the
    step started, so that what recovery says is what the task then does. A step the
    owner already chose to skip or retry is skipped or retried without asking again."""
    payload = task.payload
    if not isinstance(payload, Executing) or task.state is not TaskState.Executing:
        return False
    i = payload.current_step
    if step.step != i or step.status is not StepStatus.started:
        return False
    if i in (payload.skip_step, payload.retry_step):
        return False  # the owner answered already (a crash came before it was acted on)
    rule = should_retry_step(step, step.semantics, step.idempotency)
    return rule is StepRecovery.RequireOwnerConfirmation


def _never(task: TaskRecord, step: StepRecord) -> bool:
    return False


RUNNERS: dict[TaskKind, Runner] = {
    TaskKind.pipeline: Runner(
        TaskKind.pipeline,
        advance=pipeline.advance,
        apply_answer=asking.answer_outcome,
        ages_out=True,
        write_in_doubt=_pipeline_in_doubt,
    ),
    # a workflow's trace's recovery check decides about its step in flight
    TaskKind.workflow: Runner(
        TaskKind.workflow,
        advance=workflow.advance_workflow,
        apply_answer=workflow.answer_outcome,
        ages_out=False,
        write_in_doubt=_never,
    ),
}
assert set(RUNNERS) == set(TaskKind), "every task kind has its runner"


def runner_for(task: TaskRecord) -> Runner:
    return RUNNERS[task.kind]
