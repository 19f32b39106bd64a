"""`--wait`: wait for one task (others do not count), print its state and its answer, and
exit with a code a script can act on."""

from __future__ import annotations

import sys
from typing import Any

from ..journal import TaskState
from ..kernel.api.requests import WAIT_TASK, TaskArgs
from ..policy.printable import printable
from ..vault.home import Home
from . import client
from .output import emit, out, read

# `--wait`'s exit codes for a task that did not get done (README: exit codes); 0 for one
# that completed or waits on you (what it waits on is printed)
EXIT_CODES = {TaskState.Failed: 3, TaskState.Cancelled: 4, TaskState.Abandoned: 5}

WAIT_HELP = (
    "Wait for this task to end or to wait on you (other tasks do not count), then show "
    "its answer; exit 3 if it failed, 4 if it was cancelled, 5 if it was abandoned."
)

_HINTS = {
    TaskState.AwaitingApproval: "it asks you: pfar approvals",
    TaskState.AwaitingCredential: "it asks you for a credential: pfar approvals",
    TaskState.WaitingForUser: "it waits for you: pfar send ID MESSAGE (or /done)",
    TaskState.Paused: "paused: pfar resume ID",
}


def wait_and_show(home: Home, task_id: str, as_json: bool) -> None:
    """Wait for the task `task_id` to end or to wait on the owner; show it; exit non-zero
    when it failed, was cancelled or was abandoned."""
    client.send(home, WAIT_TASK, TaskArgs(task_id), timeout=None)
    timeline = read(home, lambda r: r.timeline(task_id))
    task = timeline.task
    state = TaskState(task.state)
    if as_json:
        shown: dict[str, Any] = {**task.to_json(), "answer": timeline.answer}
        emit(shown, True)
    else:
        out.print(f"task {task.task_id} {state}")
        if task.error:
            out.print(f"error: {printable(task.error, indent='  ')}")
        if timeline.answer:
            out.print(printable(timeline.answer, indent=""))
        if state in _HINTS:
            out.print(f"({_HINTS[state].replace('ID', task.task_id[:8])})")
    code = EXIT_CODES.get(state, 0)
    if code:
        sys.exit(code)
