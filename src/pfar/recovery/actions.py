"""Recovery decisions (persistence spec §7.2, §7.3): pure functions of journaled data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from ..journal.records import StepRecord, StepStatus, TaskRecord
from ..journal.records import parse_rfc3339 as _parse
from ..journal.states import PAUSE_REQUESTED, TaskState
from ..runners.step_rules import StepRecovery, should_retry_step


class RecoveryAction(StrEnum):
    RetryFromScratch = "RetryFromScratch"
    ResumeExecution = "ResumeExecution"
    Resynthesize = "Resynthesize"
    RepromptApproval = "RepromptApproval"
    RepromptCredential = "RepromptCredential"
    # a write was in flight and may have happened: the task resumes by asking the owner
    # (retry, skip or fail); nothing runs before the answer
    AskOwner = "AskOwner"
    Abandon = "Abandon"
    # the owner's holds outlive a restart: a paused task stays paused (a running one whose
    # pause was asked for is paused), and a cancel whose intent was committed is finished
    LeavePaused = "LeavePaused"
    Pause = "Pause"
    FinishCancel = "FinishCancel"


def determine_recovery_action(task: TaskRecord) -> RecoveryAction:
    """What an unfinished task needs after a restart, from its state alone (spec §7.2)."""
    state = task.state
    if state in (TaskState.Extracting, TaskState.Planning):
        return RecoveryAction.RetryFromScratch
    if state is TaskState.Executing:
        # no step completed yet: nothing to resume, run the (journaled) plan from its start
        return (
            RecoveryAction.ResumeExecution
            if task.current_step > 0
            else (RecoveryAction.RetryFromScratch)
        )
    if state is TaskState.Synthesizing:
        return RecoveryAction.Resynthesize
    if state is TaskState.AwaitingApproval:
        return RecoveryAction.RepromptApproval
    if state is TaskState.AwaitingCredential:
        return RecoveryAction.RepromptCredential
    if state is TaskState.Paused:
        return RecoveryAction.LeavePaused
    if state is TaskState.Cancelling:
        return RecoveryAction.FinishCancel
    return RecoveryAction.Abandon  # terminal states never reach recovery


@dataclass(frozen=True, slots=True)
class Decision:
    task_id: str
    action: RecoveryAction
    reason: str = ""


def decide(
    task: TaskRecord,
    now: datetime,
    max_age: timedelta,
    max_attempts: int,
    crashed: bool,
    in_flight: StepRecord | None = None,
) -> Decision:
    """The whole decision for one task: age and crash-loop limits first, then its state,
    then the step it had in flight (`in_flight`: its step still marked started, if any).

    Parked tasks are not aged out: they wait on the owner under their own deadline,
    and a restart must not change their fate. Nor are traced workflows: on resume
    their trace's recovery check decides, and asks the owner where it must. Nor is
    what the owner holds: a paused task, a task whose pause or cancel was asked for.
    """
    if task.state in (TaskState.Paused, TaskState.Cancelling):
        return Decision(task.task_id, determine_recovery_action(task))
    if task.state.working and task.detail.get(PAUSE_REQUESTED):
        return Decision(
            task.task_id,
            RecoveryAction.Pause,
            "the owner asked for a pause before the restart: paused, not resumed",
        )
    # A workflow's steps may run for hours: its trace, not its age, says what to do.
    if not task.state.parked and not task.is_workflow:
        age = now - _parse(task.last_activity)
        if age > max_age:
            minutes = int(age.total_seconds() // 60)
            return Decision(
                task.task_id,
                RecoveryAction.Abandon,
                f"Abandoned after restart: task exceeded max recovery age ({minutes} min old)",
            )
        if crashed and task.recovery_attempts >= max_attempts:
            return Decision(
                task.task_id,
                RecoveryAction.Abandon,
                f"Abandoned: its recovery crashed the kernel {task.recovery_attempts} times",
            )
    doubt = write_in_doubt(task, in_flight)
    if doubt:
        return Decision(task.task_id, RecoveryAction.AskOwner, doubt)
    return Decision(task.task_id, determine_recovery_action(task))


def write_in_doubt(task: TaskRecord, step: StepRecord | None) -> str:
    """Why the owner will be asked about `task`'s write in flight, or "" when they won't.

    The pipeline's own rule (should_retry_step) on what the journal recorded when the
    step started (its semantics and idempotency), so that what recovery says is what the
    task then does. A traced workflow is left to its trace's recovery check; a step the
    owner already chose to skip or retry is skipped or retried without asking again.
    """
    if task.state is not TaskState.Executing or task.is_workflow or step is None:
        return ""
    i = task.current_step
    if step.step != i or step.status is not StepStatus.started:
        return ""
    if i in (task.detail.get("skip_step"), task.detail.get("retry_step")):
        return ""  # the owner answered already (a crash came before the answer was acted on)
    rule = should_retry_step(step, step.semantics, step.idempotency)
    if rule is not StepRecovery.RequireOwnerConfirmation:
        return ""
    total = len((task.plan or {}).get("steps", []))
    return (
        f"the write in flight ({step.tool}, step {i + 1} of {total}) may have happened: "
        "the owner will be asked to retry, skip or fail it"
    )
