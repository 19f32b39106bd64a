"""Sandboxes for commands (R7): bubblewrap instead of containers.

A command a tool runs (`Bash` in a loop task, `shell.run` in a pipeline, a workflow's
step, a session's agent) can run in a bubblewrap sandbox: its own pid namespace, the
whole system read-only, the task's directory the only writable place, a private `/tmp`,
and no network unless allowed.

What a sandbox must never see is mounted away (the trust boundary, docs/security.md):
pfar's home (the vault, the control socket and its token, the owner log, hooks) and the
owner's usual credential folders are covered by an empty tmpfs (a file by /dev/null),
so nothing inside can read them or connect to the socket: a unix socket's `connect()`
is not stopped by a read-only mount, only by the path not being there. A repository's
`.git/` in the task's directory stays read-only (its hooks and config are programs the
owner's own git would run later); a worktree pfar made gets its own index and the
loose objects `git add` writes, nothing else of the repository's git directory.

Each sandbox carries a label in its environment, `PFAR_SANDBOX=<home>:<task id>`, which
`/proc/<pid>/environ` shows for the life of the process. Reconciliation (at start,
before recovery, and every 30 s) finds every process labelled with this home whose task
is not running on this kernel and kills its process group: after a SIGKILL of the
kernel, the orphans of its sandboxes are gone within 30 s of the next start (R7).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import processes
from . import sandbox_mounts as mounts

LABEL = "PFAR_SANDBOX"

# what a command gets of the kernel's environment whatever `[sandbox] pass_env` says
_PASSED = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}
)


def available() -> bool:
    return shutil.which("bwrap") is not None


def home_tag(home: Path) -> str:
    """A short, stable name for a home (its path's hash): labels never carry paths."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How one task's commands are confined."""

    home: str  # home_tag
    task_id: str
    workdir: Path
    network: bool = False
    # paths mounted away (pfar's home, credential folders): not there inside
    hidden: tuple[Path, ...] = ()
    # variables of the kernel's environment a command gets besides the basics
    pass_env: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return f"{self.home}:{self.task_id}"

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the sandbox.

        bubblewrap mounts in the order given, so a hidden path that holds the task's
        directory is covered first and the directory bound back over it; one inside
        the task's directory is covered after the directory is bound, and so are the
        read-only places in it (sandbox_mounts.py)."""
        work = self.workdir.resolve()
        wrapped = [
            "bwrap",
            "--unshare-pid",
            "--unshare-ipc",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",  # noqa: S108  (a private tmpfs, mounted inside the sandbox)
        ]
        hidden = [h for h in map(mounts.resolved, self.hidden) if h is not None]
        for path in hidden:
            if not path.is_relative_to(work):
                wrapped += mounts.hide(path)
        root = mounts.worktree_root(work)
        if root is not None and root != work:  # git looks for `.git` above the task's folder
            wrapped += ["--ro-bind", str(root), str(root)]
        wrapped += ["--bind", str(work), str(work)]
        wrapped += mounts.skills_binds(work)  # before what is hidden in it, which covers it
        for path in hidden:
            if path.is_relative_to(work):
                wrapped += mounts.hide(path)
        for path in mounts.read_only_inside(work):
            wrapped += ["--ro-bind", str(path), str(path)]
        wrapped += mounts.worktree_binds(work)
        wrapped += ["--chdir", str(work)]
        if not self.network:
            wrapped.append("--unshare-net")
        return [*wrapped, "--", *argv]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The command's environment: what the tool set for it (its credentials, pfar's
        labels) and, of what the kernel inherited, only the basics and `pass_env`, so
        that an agent socket or a token exported where `pfar run` started stays out."""
        kept = {
            name: value
            for name, value in base.items()
            if name in _PASSED
            or name in self.pass_env
            or name.startswith(("LC_", "PFAR_"))
            or os.environ.get(name) != value  # set by the tool, not inherited
        }
        return {**kept, LABEL: self.label}


def labelled(home: str) -> Iterator[tuple[int, str]]:
    """(pid, task id) of every running process of this user labelled with this home."""
    return processes.labelled(LABEL, f"{home}:")


def reconcile(home: str, running: Callable[[str], bool]) -> int:
    """Kill every sandbox of this home whose task is not running here; how many groups."""
    killed: set[int] = set()
    for pid, task_id in list(labelled(home)):
        if running(task_id):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group in killed or group == os.getpgid(0):
                continue  # never the kernel's own group
            os.killpg(group, signal.SIGKILL)
            killed.add(group)
    return len(killed)
