"""An external agent command run for a session: its own process group, output to a log file.

`start` returns an `AgentProcess` whose `identity` (pid, start_time, argv) is what
the kernel records in the session's `process` while it is ACTIVE. A later kernel
can then end the agent if the kernel that started it died (`CrashRecovery`, by
pid plus start time, so a reused pid is never signalled), and `stop` ends it on
purpose: SIGTERM to the whole group, SIGKILL to whatever is left after `timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ToolFailed
from ..journal.records import now_rfc3339
from .processes import identity, start_time
from .sandbox import Sandbox

StopOutcome = Literal["not_running", "terminated", "killed"]

_POLL = 0.02  # seconds between looks at /proc while waiting for a group to end
_KILL_GRACE = 5.0  # how long to wait for SIGKILL to land before giving up looking


@dataclass(frozen=True, slots=True)
class AgentProcess:
    """A started agent. Keep it while the agent runs: `wait` reaps it."""

    session_id: str
    identity: dict[str, Any]  # {"pid", "start_time", "argv"}: JSON, for the session row
    log_path: Path
    proc: asyncio.subprocess.Process

    @property
    def pid(self) -> int:
        return int(self.identity["pid"])

    async def wait(self) -> int:
        """Its exit code (negative: the signal that ended it)."""
        return await self.proc.wait()


async def start(
    session_id: str,
    argv: Sequence[str],
    *,
    project_path: str | os.PathLike[str],
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> AgentProcess:
    """Start `argv` in `project_path` for the session; output goes to `<log_dir>/<id>.log`.

    The agent gets PFAR_SESSION_ID in its environment, no stdin, and a process
    group of its own (it leads it), so that all it starts can be ended together.
    """
    args = list(argv)
    who = f"agent for session {session_id}"
    if not args or not all(isinstance(a, str) and a for a in args):
        raise ToolFailed(f"{who}: argv must be a non-empty list of non-empty strings")
    if not session_id or "/" in session_id or session_id in (".", ".."):
        raise ToolFailed(f"{who}: not a usable session id for a log file name")
    cwd = Path(project_path)
    log_path, fd = _open_log(who, session_id, args, cwd, log_dir)
    full_env = {**os.environ, **(env or {}), "PFAR_SESSION_ID": session_id}
    command = args  # what the session runs, as journaled (not the sandbox around it)
    if sandbox is not None:  # [sandbox] enabled: the agent is confined as a task's command is
        args, full_env = sandbox.wrap(args), sandbox.env(full_env)
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=cwd,
            env=full_env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=fd,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        raise ToolFailed(f"{who}: cannot start {args[0]!r}: {exc}") from None
    finally:
        os.close(fd)
    # An agent that has already ended (and been reaped) has no start time to read: it
    # is recorded with None, which names no process, so nothing is ever signalled for
    # it; its exit code still reaches whoever waits on it, as for any agent.
    found = identity(proc.pid)
    ident = {"pid": proc.pid, "start_time": None if found is None else found["start_time"]}
    return AgentProcess(session_id, {**ident, "argv": command}, log_path, proc)


# placeholders in `[sessions] agent_command` and the variables that carry the same values
PLACEHOLDERS = {
    "session_id": "PFAR_SESSION_ID",
    "project_path": "PFAR_PROJECT_PATH",
    "thread_id": "PFAR_THREAD_ID",
}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"}


def fill_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """The agent's argv with `{session_id}`, `{project_path}` and `{thread_id}` filled in.

    An argument is one argv element, never parsed again: a value goes in as it is. The
    exception is the script of a shell (`sh -c SCRIPT`), which the shell parses: there a
    placeholder becomes a double-quoted reference to the variable that carries the value
    ("${PFAR_THREAD_ID}"), so no value is ever read as shell code, quoted or not (shlex
    quoting breaks inside a script's own double quotes). Only these three names are
    replaced: any other brace (`${HOME}`, awk's `{print}`) is left alone.
    """
    script = _shell_script_index(template)
    argv = []
    for i, arg in enumerate(template):
        for name, var in PLACEHOLDERS.items():
            arg = arg.replace("{" + name + "}", f'"${{{var}}}"' if i == script else values[name])
        argv.append(arg)
    return argv


def _shell_script_index(argv: Sequence[str]) -> int | None:
    """Where the script is in `[env [NAME=VALUE...]] SHELL [options] -c SCRIPT [args]`."""
    i = 0
    if i < len(argv) and os.path.basename(argv[i]) == "env":
        i += 1
        while i < len(argv) and ("=" in argv[i] or argv[i].startswith("-")):
            i += 1
    if i >= len(argv) or os.path.basename(argv[i]) not in _SHELLS:
        return None
    command = False
    i += 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("--"):
            i += 1
            continue
        if arg[:1] in ("-", "+") and len(arg) > 1:
            command = command or "c" in arg[1:]
            # -o and -O take a value, also at the end of a cluster: -euo pipefail
            i += 2 if ("o" in arg[1:] or "O" in arg[1:]) else 1
            continue
        break
    return i if command and i < len(argv) else None


def _open_log(
    who: str, session_id: str, args: list[str], cwd: Path, log_dir: Path
) -> tuple[Path, int]:
    """Check the project directory; open `<log_dir>/<session_id>.log` to append to."""
    if not cwd.is_dir():
        raise ToolFailed(f"{who}: project path {cwd} is not a directory")
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = log_dir / f"{session_id}.log"
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"--- pfar: {now_rfc3339()} starting {args!r} in {cwd}\n".encode())
    except OSError:
        os.close(fd)
        raise
    return log_path, fd


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of `pid` from /proc, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def is_running(process: Mapping[str, Any]) -> bool:
    """True while the recorded process itself (pid and start time) runs (a zombie does not)."""
    pid = int(process.get("pid", 0))
    if pid <= 0 or start_time(pid) != process.get("start_time"):
        return False
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Pids of the living (not zombie) processes in process group `pgid`."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


async def _wait_group(pgid: int, seconds: float) -> bool:
    """True once no living process is left in the group; False if `seconds` pass first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while group_members(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def stop(process: Mapping[str, Any], timeout: float = 5.0) -> StopOutcome:
    """End the agent's process group: SIGTERM, then SIGKILL to what is left after `timeout`.

    Does nothing ("not_running") unless the recorded process (pid and start time)
    is the one still there, so a pid the OS reused is never signalled.
    """
    pid, started = int(process.get("pid", 0)), process.get("start_time")
    if pid <= 0 or started is None or start_time(pid) != started or not group_members(pid):
        return "not_running"
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "not_running"
    if await _wait_group(pid, timeout):
        return "terminated"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    await _wait_group(pid, _KILL_GRACE)
    return "killed"
