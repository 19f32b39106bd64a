"""`--wait`: wait for one task (others do not count), print its state and its answer, and
exit with a code a script can act on."""

from __future__ import annotations

import sys
from typing import Any

from ..journal import TaskState
from ..kernel.api.arguments import TaskArgs
from ..kernel.api.requests import WAIT_TASK
from ..kernel.api.wire import wire_json
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
        shown: dict[str, Any] = {**wire_json(task), "answer": timeline.answer}
        emit(shown, True)
    else:
        out.print(f"task {task.task_id} {state}")
        if task.error:
            out.print(f"error: {printable(task.error, indent='  ')}")
        if timeline.answer:
            out.print(printable(timeline.answer, indent=""))
        if state in (TaskState.AwaitingApproval, TaskState.AwaitingCredential):
            _print_questions(home, task.task_id)
        elif state in _HINTS:
            out.print(f"({_HINTS[state].replace('ID', task.task_id[:8])})")
    code = EXIT_CODES.get(state, 0)
    if code:
        sys.exit(code)


def _print_questions(home: Home, task_id: str) -> None:
    """What a task stopped to ask, and the commands that answer it: `--wait` ended
    because the task waits on the owner."""
    asked = wire_json(read(home, lambda r: r.questions(answered=False)))
    for a in asked["approvals"]:
        if a["task_id"] != task_id:
            continue
        aid = a["approval_id"]
        out.print(f"it asks (approval {aid}): {printable(str(a['description']), indent='  ')}")
        others = [o for o in a["options"] if o not in ("approve", "deny")]
        ways = [f"pfar approve {aid}", f"pfar deny {aid}"]
        ways += [f"pfar answer {aid} {o}" for o in others]
        out.print("answer with: " + " | ".join(ways))
    for c in asked["credentials"]:
        if c["task_id"] == task_id:
            out.print(
                f"it needs a credential for {printable(str(c['service']), indent='  ')}: "
                f"pfar credential {c['prompt_id']} (the secret is read from stdin)"
            )
