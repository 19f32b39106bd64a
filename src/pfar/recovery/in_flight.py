"""A task in flight during kernel death after kernel death: the owner's question and answer.

That a task was running each time the kernel died says nothing about why it died: a
kernel killed from outside every second or two finds some task in flight every time.
So recovery states what it knows (in flight during N deaths in a row, no progress
between them) and asks the owner: resume the task where it was, or abandon it. A task
that really does kill the kernel each time is stopped all the same, since a parked
task runs nothing until the answer; resuming it is the owner's choice, and it is
asked again after as many deaths more (a "resume" is spent by the run it starts).
"""

from __future__ import annotations

from dataclasses import replace

from ..answers import Abandon, Answer, Resume
from ..errors import AnswerDoesNotFit, MalformedTaskRow
from ..journal import ApprovalRecord, Move, TaskRecord, TaskState, TaskUpdate
from ..journal.payloads import Abandoned, AwaitingApproval, InFlight, Working
from ..journal.question_kinds import QuestionKind
from ..runners.asking import new_question

OPTIONS = [Resume().kind, Abandon().kind]


def in_flight_question(
    task: TaskRecord, deaths: int, title: str, timeout: float
) -> tuple[ApprovalRecord, AwaitingApproval]:
    """The question parking `task` and the payload it parks with: the one it was in, so
    that "resume" puts it back exactly where it was."""
    if not isinstance(task.payload, Working):
        raise MalformedTaskRow(task.task_id, "state", f"{task.state} is not a running state")
    where = task.state.value
    if task.state is TaskState.Executing:
        where += f", step {task.current_step + 1} of {len(task.plan_steps)}"
    approval = new_question(
        task.task_id,
        action_type=QuestionKind.in_flight_deaths,
        step=task.current_step,
        tool=None,
        options=list(OPTIONS),
        description=(
            f"Task {title} ({task.task_id[:8]}) was in flight ({where}) during {deaths} "
            "kernel deaths in a row, with no progress between them. pfar cannot tell "
            "whether it caused them. Resume it where it was, or abandon it?"
        ),
        timeout=timeout,
    )
    then = replace(task.payload, pause_requested=False)
    parked = AwaitingApproval(
        approval_id=approval.approval_id,
        step=task.current_step,
        in_flight=InFlight(deaths=deaths, then=then),
    )
    return approval, parked


def in_flight_answer(task: TaskRecord, approval: ApprovalRecord, answer: Answer) -> Move:
    """Where the owner's answer sends the task (runs inside the decision's commit).

    "resume": back to the state and payload it was parked from; the commit resets its
    count of deaths, so the owner is asked again only after as many deaths more.
    """
    parked = task.payload
    if not isinstance(parked, AwaitingApproval) or parked.in_flight is None:
        raise MalformedTaskRow(
            task.task_id,
            "state_detail.in_flight",
            f"approval {approval.approval_id} has no state to resume to",
        )
    match answer:
        case Abandon():
            return Move(
                Abandoned(),
                TaskUpdate(
                    error=f"Abandoned by the owner: it was in flight during "
                    f"{parked.in_flight.deaths} kernel deaths in a row, with no progress "
                    "between them"
                ),
            )
        case Resume():
            return Move(parked.in_flight.then)
        case _:
            raise AnswerDoesNotFit(approval.approval_id, answer.kind, OPTIONS)
