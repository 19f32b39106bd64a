"""Which runner advances a task: its row's `kind` says, and this table answers.

Each runner owns what its states mean, how the owner's answers apply to it, and
the part of recovery's decision that is its own. The kernel and recovery ask
the table, never an id prefix or a template name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..answers import Answer
from ..journal import (
    ApprovalRecord,
    Move,
    Semantics,
    StepRecord,
    StepStatus,
    TaskKind,
    TaskRecord,
    TaskState,
)
from ..journal.payloads import Executing
from . import asking, loop, pipeline
from .services import Services
from .step_rules import StepRecovery, should_retry_step
from .workflow import answers as workflow_answers
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
    # recovery: what it will do with the write a crash cut off (its step still marked
    # started): ask the owner, check its effect, or send it again under its key; None
    # when there is nothing to say (a read, or a step the owner already answered for)
    in_flight_write: Callable[[TaskRecord, StepRecord], StepRecovery | None]


def _step_in_flight(task: TaskRecord, step: StepRecord) -> StepRecovery | None:
    """The step executor's own rule (should_retry_step) on what the journal recorded when the
    step started, so that what recovery says is what the task then does. A step the
    owner already chose to skip or retry is skipped or retried without asking again."""
    payload = task.payload
    if not isinstance(payload, Executing) or task.state is not TaskState.Executing:
        return None
    i = payload.current_step
    if step.step != i or step.status is not StepStatus.started:
        return None
    if i in (payload.skip_step, payload.retry_step):
        return None  # the owner answered already (a crash came before it was acted on)
    rule = should_retry_step(step, step.semantics, step.idempotency)
    return None if step.semantics is Semantics.Read else rule


def _trace_decides(task: TaskRecord, step: StepRecord) -> StepRecovery | None:
    return None


RUNNERS: dict[TaskKind, Runner] = {
    TaskKind.pipeline: Runner(
        TaskKind.pipeline,
        advance=pipeline.advance,
        apply_answer=asking.answer_outcome,
        ages_out=True,
        in_flight_write=_step_in_flight,
    ),
    # a workflow's trace's recovery check decides about its step in flight
    TaskKind.workflow: Runner(
        TaskKind.workflow,
        advance=workflow.advance_workflow,
        apply_answer=workflow_answers.answer_outcome,
        ages_out=False,
        in_flight_write=_trace_decides,
    ),
    # a loop's tool calls are the step executor's steps: the same rule
    TaskKind.loop: Runner(
        TaskKind.loop,
        advance=loop.advance,
        apply_answer=loop.apply_answer,
        ages_out=False,  # a conversation may wait for days; its turns are its progress
        in_flight_write=_step_in_flight,
    ),
}
assert set(RUNNERS) == set(TaskKind), "every task kind has its runner"


def runner_for(task: TaskRecord) -> Runner:
    return RUNNERS[task.kind]
