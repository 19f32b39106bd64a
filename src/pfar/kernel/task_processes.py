"""Ending the processes a task's commands left running (tools/task_processes.py finds
them by their label): a task's when it ends, and every task's of this home when no
kernel supervises them (at start, before any task resumes, and at shutdown)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable

from ..errors import PfarError
from ..journal.states import TaskState
from ..journal.store import Store
from ..tools import task_processes
from ..tools.processes import end_group_if_same
from .audit import AuditLog

log = logging.getLogger("pfar.kernel")


async def end_processes(
    journal: Store, ended: Callable[[TaskState], bool], only: str | None = None
) -> int:
    """SIGKILL the labelled processes of every task of `journal` (or of `only`) whose
    state `ended` accepts; how many process groups. A label naming no task of this
    journal belongs to another home, or to nothing pfar knows: left alone."""
    by_task: dict[str, list[int]] = defaultdict(list)
    # off the event loop: a walk through /proc costs with every process on the machine
    for pid, task_id in await asyncio.to_thread(lambda: list(task_processes.labelled())):
        if only is None or task_id == only:
            by_task[task_id].append(pid)
    if only is not None and only not in by_task:
        by_task[only] = []  # nothing left running; its state still says whether to forget it
    pids: list[int] = []
    for task_id, found in by_task.items():
        try:
            state = (await journal.tasks.get(task_id)).state
        except PfarError:
            continue  # not this home's task (or a row that cannot be read: never guessed)
        if ended(state):
            pids += found
            task_processes.forget(task_id)
    killed = task_processes.end(pids) if pids else 0
    if killed:
        log.warning("ended %d process group(s) that tasks' commands left running", killed)
    return killed


async def end_recorded(journal: Store, audit: AuditLog, task_id: str | None, event: str) -> int:
    """End the process groups that steps (of `task_id`, or of every task) recorded and
    that still run as recorded; audit each one as `event`. Returns how many."""
    ended = 0
    for owner, step, process in await journal.tasks.started_processes(task_id):
        if end_group_if_same(process):
            ended += 1
            audit.log(event, task_id=owner, step=step, **process)
    return ended


def may_have_left(task_id: str) -> bool:
    """A command of the task was started by this kernel's process."""
    return task_processes.may_have_left(task_id)


def terminal(state: TaskState) -> bool:
    """Ended, or being cancelled (its coroutine is stopped before the cancel completes)."""
    return state.terminal or state is TaskState.Cancelling


def any_state(state: TaskState) -> bool:
    """At start and at shutdown no task runs: whatever a task left runs unsupervised."""
    return True
