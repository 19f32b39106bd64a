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

from typing import Any

from ..errors import PfarError
from ..journal import ApprovalRecord, TaskRecord, TaskState
from ..journal.states import WORKING
from ..runners.asking import new_question

IN_FLIGHT_DEATHS = "in_flight_deaths"  # the question's action_type
RESUME, ABANDON = "resume", "abandon"
OPTIONS = [RESUME, ABANDON]

# where a resumed task goes back to: a state in which it was running, not parked
_RUNNING_VALUES = frozenset(s.value for s in WORKING)


def in_flight_question(
    task: TaskRecord, deaths: int, title: str, timeout: float
) -> tuple[ApprovalRecord, dict[str, Any]]:
    """The question parking `task` and the detail it parks with: the state and detail it
    was in, so that "resume" puts it back exactly where it was."""
    where = task.state.value
    if task.state is TaskState.Executing:
        total = len((task.plan or {}).get("steps", []))
        where += f", step {task.current_step + 1} of {total}"
    approval = new_question(
        task.task_id,
        action_type=IN_FLIGHT_DEATHS,
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
    parked_from = {"state": task.state.value, "detail": dict(task.detail), "deaths": deaths}
    return approval, {"parked_from": parked_from}


def in_flight_answer(
    task: TaskRecord, approval: ApprovalRecord, decision: str
) -> tuple[TaskState, dict[str, Any], dict[str, Any]]:
    """Where the owner's answer sends the task (runs inside the decision's commit).

    "resume": back to the state and detail it was parked from; the commit resets its
    count of deaths, so the owner is asked again only after as many deaths more.
    """
    parked_from = task.detail.get("parked_from")
    if not isinstance(parked_from, dict):
        raise PfarError(
            f"task {task.task_id}: approval {approval.approval_id} has no state to resume to"
        )
    if decision == ABANDON:
        deaths = parked_from.get("deaths", "several")
        return (
            TaskState.Abandoned,
            {"current_step": task.current_step},
            {
                "error": f"Abandoned by the owner: it was in flight during {deaths} kernel "
                "deaths in a row, with no progress between them"
            },
        )
    if decision != RESUME:
        raise PfarError(
            f"approval {approval.approval_id} offers {', '.join(OPTIONS)}; got {decision!r}"
        )
    state = str(parked_from.get("state"))
    if state not in _RUNNING_VALUES:
        raise PfarError(
            f"task {task.task_id}: approval {approval.approval_id} would resume it to "
            f"{state!r}, which is not a running state"
        )
    detail = parked_from.get("detail")
    return TaskState(state), dict(detail) if isinstance(detail, dict) else {}, {}
