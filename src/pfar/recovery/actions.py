"""Recovery decisions (persistence spec §7.2, §7.3): pure functions of journaled data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from ..journal.payloads import pause_requested
from ..journal.records import StepRecord, TaskRecord
from ..journal.records import parse_rfc3339 as _parse
from ..journal.states import TaskState
from ..runners.registry import runner_for
from ..runners.step_rules import StepRecovery


class RecoveryAction(StrEnum):
    RetryFromScratch = "RetryFromScratch"
    ResumeExecution = "ResumeExecution"
    Resynthesize = "Resynthesize"
    RepromptApproval = "RepromptApproval"
    RepromptCredential = "RepromptCredential"
    # a write was in flight and may have happened: the task resumes by asking the owner
    # (retry, skip or fail); nothing runs before the answer
    AskOwner = "AskOwner"
    # the kernel died again and again with the task in flight and no progress between the
    # deaths: the task parks on a question (resume or abandon); nothing runs before the answer
    ParkInFlight = "ParkInFlight"
    Abandon = "Abandon"
    # the owner's holds outlive a restart: a paused task stays paused (a running one whose
    # pause was asked for is paused), and a cancel whose intent was committed is finished
    LeavePaused = "LeavePaused"
    Pause = "Pause"
    FinishCancel = "FinishCancel"
    # a loop task waiting for the owner's next message: it keeps waiting (no deadline)
    AwaitInput = "AwaitInput"
    # a loop task blocked on its subtask: it keeps waiting, and is woken at once if the
    # subtask ended before the restart (the wake-up may have died with the kernel)
    AwaitSubtask = "AwaitSubtask"
    # a task waiting for a slot or for rate headroom: it waits again, in its turn (a
    # queue's wait is pfar's own: it never makes a task too old)
    Requeue = "Requeue"


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
    if state is TaskState.WaitingForUser:
        return RecoveryAction.AwaitInput
    if state is TaskState.Blocked:
        return RecoveryAction.AwaitSubtask
    if state is TaskState.Queued:
        return RecoveryAction.Requeue
    if state is TaskState.Paused:
        return RecoveryAction.LeavePaused
    if state is TaskState.Cancelling:
        return RecoveryAction.FinishCancel
    return RecoveryAction.Abandon  # terminal states never reach recovery


@dataclass(frozen=True, slots=True)
class TooOld:
    """Unfinished, not waiting on the owner, and last moved longer ago than the max age."""

    minutes: int

    def text(self) -> str:
        return f"Abandoned after restart: task exceeded max recovery age ({self.minutes} min old)"


@dataclass(frozen=True, slots=True)
class InFlightDeaths:
    """The kernel died `deaths` times in a row with the task in flight and no journaled
    progress between the deaths. What is known, not why: nothing says the task caused them."""

    deaths: int

    def text(self) -> str:
        return (
            f"in flight during {self.deaths} kernel deaths in a row, no progress between "
            "them: the owner will be asked to resume or abandon it"
        )


@dataclass(frozen=True, slots=True)
class WriteInDoubt:
    """A write without idempotency was in flight: it may or may not have happened."""

    tool: str
    step: int  # 0-based
    total: int

    def text(self) -> str:
        return (
            f"the write in flight ({self.tool}, {_where(self.step, self.total)}) may have "
            "happened: the owner will be asked to retry, skip or fail it"
        )


@dataclass(frozen=True, slots=True)
class WriteCutOff:
    """A write that is safe to resume was in flight: it is checked first (`checked`) or
    sent again under its idempotency key. The owner's approval of it was spent by the
    run the crash cut off, so a write that needs one asks for it again before it runs."""

    tool: str
    step: int  # 0-based
    total: int
    checked: bool

    def text(self) -> str:
        how = (
            "is checked first and run again only if it did not happen"
            if self.checked
            else "is sent again under the same idempotency key"
        )
        return (
            f"the write in flight ({self.tool}, {_where(self.step, self.total)}) {how}; "
            "if it needs the owner's approval, the owner is asked again first"
        )


def _where(step: int, total: int) -> str:
    return f"step {step + 1} of {total}" if total else f"tool call {step + 1}"


@dataclass(frozen=True, slots=True)
class PauseRequested:
    """The owner asked for a pause while the task ran; the kernel died before it took.
    `cut`: the write the crash cut off meanwhile, which its resume deals with."""

    cut: WriteInDoubt | WriteCutOff | None = None

    def text(self) -> str:
        paused = "the owner asked for a pause before the restart: paused, not resumed"
        return paused if self.cut is None else f"{paused}; once resumed, {self.cut.text()}"


@dataclass(frozen=True, slots=True)
class Unrecoverable:
    """A state recovery has no rule for (terminal states never reach recovery)."""

    def text(self) -> str:
        return "Abandoned: unrecoverable state"


# Why recovery decided what it did, when it is more than the task's state: a closed union,
# so that nothing downstream reads the reason's prose to find out what happened.
Reason = TooOld | InFlightDeaths | WriteInDoubt | WriteCutOff | PauseRequested | Unrecoverable


@dataclass(frozen=True, slots=True)
class Decision:
    task_id: str
    action: RecoveryAction
    why: Reason | None = None

    @property
    def reason(self) -> str:
        """The reason as the owner and `pfar recover --dry-run` read it ("" when none)."""
        return self.why.text() if self.why is not None else ""


def deaths_in_flight(task: TaskRecord, crashed: bool) -> int:
    """How many kernel deaths in a row found `task` in flight with no progress between them.

    Only meaningful after a crash: then the task was in flight when the kernel died (it is
    unfinished and not waiting on the owner), and `recovery_attempts` counts the recovered
    runs since its last progress, each of which also ended in a death (every journaled
    move resets it; a clean stop does not count one). 0 after a clean stop, and for a
    parked task, which runs nothing.
    """
    if not crashed or task.state.parked or task.state.terminal:
        return 0
    if task.state is TaskState.Queued:  # nothing of it ran: it waited for a slot
        return 0
    return task.recovery_attempts + 1


def decide(
    task: TaskRecord,
    now: datetime,
    max_age: timedelta,
    max_deaths: int,
    crashed: bool,
    in_flight: StepRecord | None = None,
) -> Decision:
    """The whole decision for one task: age and repeated kernel deaths first, then its
    state, then the step it had in flight (`in_flight`: its step still marked started).

    Parked tasks are not aged out: they wait on the owner under their own deadline,
    and a restart must not change their fate. Nor are traced workflows: on resume
    their trace's recovery check decides, and asks the owner where it must. Nor is
    what the owner holds: a paused task, a task whose pause or cancel was asked for.

    A task in flight during `max_deaths` kernel deaths in a row is never abandoned for
    it: that it was running when the kernel died says nothing about why the kernel died.
    It parks on a question to the owner, which also stops a task that really does kill
    the kernel each time (a parked task runs nothing until the answer).
    """
    if task.state.held:
        return Decision(task.task_id, determine_recovery_action(task))
    if pause_requested(task.payload):  # the pause held back the step's end, not its start
        cut = write_in_flight(task, in_flight)
        return Decision(task.task_id, RecoveryAction.Pause, PauseRequested(cut))
    if task.state is TaskState.Queued:
        return Decision(task.task_id, RecoveryAction.Requeue)
    # A workflow's steps may run for hours: its trace, not its age, says what to do.
    if not task.state.parked and runner_for(task).ages_out:
        age = now - _parse(task.last_activity)
        if age > max_age:
            return Decision(
                task.task_id, RecoveryAction.Abandon, TooOld(int(age.total_seconds() // 60))
            )
    deaths = deaths_in_flight(task, crashed)
    if deaths >= max_deaths:
        return Decision(task.task_id, RecoveryAction.ParkInFlight, InFlightDeaths(deaths))
    match write_in_flight(task, in_flight):
        case WriteInDoubt() as doubt:
            return Decision(task.task_id, RecoveryAction.AskOwner, doubt)
        case WriteCutOff() as cut:
            return Decision(task.task_id, determine_recovery_action(task), cut)
    return Decision(task.task_id, determine_recovery_action(task))


def write_in_flight(task: TaskRecord, step: StepRecord | None) -> WriteInDoubt | WriteCutOff | None:
    """What becomes of `task`'s write a crash cut off, as its runner will do it: the owner
    is asked, or it is checked or sent again under its key; None when there is nothing to
    say (no write in flight, or a traced workflow, whose trace's recovery check decides)."""
    if step is None:
        return None
    total = len(task.plan_steps)  # 0 for a loop task: its calls are numbered, not planned
    match runner_for(task).in_flight_write(task, step):
        case StepRecovery.RequireOwnerConfirmation:
            return WriteInDoubt(step.tool, step.step, total)
        case StepRecovery.CheckEffect:
            return WriteCutOff(step.tool, step.step, total, checked=True)
        case StepRecovery.Retry:
            return WriteCutOff(step.tool, step.step, total, checked=False)
    return None
