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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import git_safe, processes
from .credential_paths import CREDENTIAL_PATHS

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
    # paths mounted away (pfar's home, credential folders): not there inside
    hidden: tuple[Path, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.home}:{self.task_id}"

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the sandbox.

        bubblewrap mounts in the order given, so a hidden path that holds the task's
        directory is covered first and the directory bound back over it; one inside
        the task's directory is covered after the directory is bound."""
        work = self.workdir.resolve()
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
        ]
        hidden = [h for h in (_resolved(p) for p in self.hidden) if h is not None]
        for path in hidden:
            if not path.is_relative_to(work):
                wrapped += _hide(path)
        wrapped += ["--bind", str(work), str(work)]
        for path in hidden:
            if path.is_relative_to(work):
                wrapped += _hide(path)
        wrapped += _git_binds(work)
        wrapped += ["--chdir", str(work)]
        if not self.network:
            wrapped.append("--unshare-net")
        return [*wrapped, "--", *argv]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, LABEL: self.label}


def hidden_paths(home: Path, owner_home: Path | None = None) -> tuple[Path, ...]:
    """What no sandbox of this pfar home sees: the home itself and the owner's credential
    folders that exist (`owner_home`: the user's home directory, `~` by default)."""
    if owner_home is None:
        owner_home = Path(os.path.expanduser("~"))
    found = [home]
    found += [owner_home / n for n in CREDENTIAL_PATHS if os.path.lexists(owner_home / n)]
    return tuple(found)


def _resolved(path: Path) -> Path | None:
    """The path a mount covers (a link's target: mounts are on what it names); None for
    a path that is not there (nothing to hide)."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def _hide(path: Path) -> list[str]:
    """Mount arguments that make `path` empty inside: a tmpfs over a folder, /dev/null
    over a file."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _git_binds(work: Path) -> list[str]:
    """`.git/` read-only in the task's directory; for a worktree pfar made
    (`<repository>/.worktrees/<name>`), what `git add` needs (git_safe.sandbox_binds:
    its own index and HEAD, the loose objects; refs, config and hooks stay read-only).

    The worktree's admin folder is found from the repository's git directory, which the
    sandbox cannot write, never from the worktree's own `.git` file, which it can: a
    command that rewrites that file gets no binds at all."""
    own = work / ".git"
    if own.is_dir() and not own.is_symlink():
        return ["--ro-bind", str(own), str(own)]
    common = work.parent.parent / ".git"
    if work.parent.name != ".worktrees" or not common.is_dir() or common.is_symlink():
        return []
    admin = _worktree_admin(common, work)
    if admin is None:
        return []
    binds: list[str] = []
    for bind in git_safe.sandbox_binds(work, admin):
        binds += ["--bind" if bind.writable else "--ro-bind", str(bind.path), str(bind.path)]
    return binds


def _worktree_admin(common: Path, work: Path) -> Path | None:
    """The folder in `common/worktrees/` whose `gitdir` names `work/.git` (git wrote it
    when it added the worktree), or None."""
    for admin in _children(common / "worktrees"):
        try:
            named = (admin / "gitdir").read_text().strip()
        except OSError:
            continue
        if Path(named) == work / ".git":
            return admin
    return None


def _children(folder: Path) -> Iterable[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


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
