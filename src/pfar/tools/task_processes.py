"""Finding the processes a task's commands left running, sandboxed or not.

A command a tool starts (`Bash` in a loop task, `shell.run` in a pipeline, a workflow's
step) carries a label in its environment, `PFAR_TASK_PROCESS=<task id>`, and every process it starts
inherits it: `nohup … &`, `setsid …` and a double fork leave the command's process
group, not its environment. `/proc/<pid>/environ` shows the label for the life of
the process, so the kernel finds them again by label, not from memory: it ends a
task's processes when the task ends, and at start those of every task of its
journal (none runs yet, so all were left by an earlier boot). Task ids are unique, so
a label names one home's task; processes of a task another home's journal holds are
never touched.

A speed bump, not a guard: a process that clears or rewrites its environment
(`env -i`, `exec -c`) drops the label and is not found. A sandbox's own pid namespace
is the guard there (bubblewrap ends every process in it with the sandbox); outside
a sandbox nothing confines what a command starts.

The kernel is not made a child subreaper (PR_SET_CHILD_SUBREAPER): the label finds a
double-forked process wherever it was re-parented, and a subreaper would have to
wait for the exit of every orphan re-parented to it, or keep them as zombies.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from . import processes

LABEL = "PFAR_TASK_PROCESS"


# the tasks whose commands this process labelled: only their end is worth a look
# through /proc (a task that started no command leaves nothing behind; those of an
# earlier boot are looked for at start and by the 30 s reconciliation)
_labelled_tasks: set[str] = set()


def env(base: dict[str, str], task_id: str) -> dict[str, str]:
    """`base` with the label of `task_id`'s processes."""
    _labelled_tasks.add(task_id)
    return {**base, LABEL: task_id}


def may_have_left(task_id: str) -> bool:
    """A command of this task was started by this process (it may have left some)."""
    return task_id in _labelled_tasks


def forget(task_id: str) -> None:
    """The task ended and its processes with it: nothing more to look for."""
    _labelled_tasks.discard(task_id)


def labelled() -> Iterator[tuple[int, str]]:
    """(pid, task id) of every running process of this user that carries a label."""
    return processes.labelled(LABEL)


def end(pids: list[int]) -> int:
    """SIGKILL the process group of each of `pids` (never the caller's own group); how
    many groups. A process that left its group is its own group's leader (`setsid`)."""
    mine = os.getpgid(0)
    killed: set[int] = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == mine:
                # in the kernel's own group (it should never be): that one process only
                os.kill(pid, signal.SIGKILL)
                continue
            if group not in killed:
                os.killpg(group, signal.SIGKILL)
                killed.add(group)
    return len(killed)
