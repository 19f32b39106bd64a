"""Sandboxes for commands (R7): bubblewrap instead of containers.

A command a tool runs (`Bash` in a loop task, `shell.run` in a pipeline) can run in a
bubblewrap sandbox: its own pid namespace, the whole system read-only, the task's
directory the only writable place, a private `/tmp`, and no network unless allowed.

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

LABEL = "PFAR_SANDBOX"


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

    @property
    def label(self) -> str:
        return f"{self.home}:{self.task_id}"

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the sandbox."""
        work = str(self.workdir.resolve())
        wrapped = [
            "bwrap",
            "--unshare-pid",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",  # noqa: S108  (a private tmpfs, mounted inside the sandbox)
            "--bind",
            work,
            work,
            "--chdir",
            work,
        ]
        if not self.network:
            wrapped.append("--unshare-net")
        return [*wrapped, "--", *argv]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, LABEL: self.label}


def labelled(home: str) -> Iterator[tuple[int, str]]:
    """(pid, task id) of every running process labelled with this home."""
    prefix = f"{LABEL}={home}:".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        for var in environ.split(b"\0"):
            if var.startswith(prefix):
                yield int(entry.name), var[len(prefix) :].decode(errors="replace")
                break


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
