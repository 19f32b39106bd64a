"""The kernel's side of sessions: the agent process each ACTIVE session runs.

A session is ACTIVE exactly while its agent runs under this kernel. The
process (pid and start time) is recorded with the move to ACTIVE, so a kernel
that dies leaves enough behind for the next one to end the orphan before it
pauses the session (recovery/sessions.py).

Session writes go through the journal's group-commit writer: they share its
commits, its fault points and its fail-stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from ..config import SessionsConfig
from ..errors import BadRequest, PfarError
from ..journal.sessions import SessionRecord, SessionStatus
from ..journal.store import SessionStore
from ..recovery.sessions import CrashRecovery
from ..tools import agent_process
from ..tools.sandbox import Sandbox

log = logging.getLogger("pfar.sessions")

# a session agent's sandbox label names `session-<id>` where a task's names its task id
SANDBOX_PREFIX = "session-"


class SessionSupervisor:
    def __init__(
        self,
        manager: SessionStore,
        log_dir: Path,
        config: SessionsConfig,
        sandbox: Callable[[str, Path], Sandbox] | None = None,
    ) -> None:
        self.manager = manager  # the journal's session family: the journal closes it
        # [sandbox] enabled: each agent runs in a sandbox labelled `session-<id>`
        self._sandbox = sandbox
        self._log_dir = log_dir
        self._config = config
        self._running: dict[str, agent_process.AgentProcess] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    def configure(self, config: SessionsConfig) -> None:
        """New settings (`pfar reload`): the next agent started uses them; a running one
        goes on as it was started."""
        self._config = config

    def is_running(self, session_id: str) -> bool:
        """Its agent runs under this kernel."""
        return session_id in self._running

    async def recover_after_crash(self) -> list[str]:
        """End agents a dead kernel left running; pause their sessions (seed 004)."""
        return await CrashRecovery(self.manager).recover()

    async def create(self, project_path: str, thread_id: str) -> SessionRecord:
        """A CREATED session; the project must be a directory now (checked again at
        resume: it may go away), and relative paths mean nothing to a kernel: refused."""
        path = Path(project_path)
        if not path.is_absolute():
            raise BadRequest("project_path", f"{project_path!r} is not an absolute path")
        if not path.is_dir():
            what = "is not a directory" if path.exists() else "does not exist"
            raise BadRequest("project_path", f"{project_path} {what}; nothing was created")
        return await self.manager.create(project_path, thread_id)

    async def resume(self, session_id: str) -> SessionRecord:
        """Start the session's agent and make it ACTIVE (from CREATED or PAUSED)."""
        s = await self.manager.get(session_id)
        if s.status not in (SessionStatus.CREATED, SessionStatus.PAUSED):
            raise PfarError(
                f"session {s.session_id} is {s.status}; only a CREATED or PAUSED session "
                "can be resumed"
            )
        argv = self._argv(s)
        proc = await agent_process.start(
            s.session_id,
            argv,
            project_path=s.project_path,
            log_dir=self._log_dir,
            sandbox=None
            if self._sandbox is None
            else self._sandbox(f"{SANDBOX_PREFIX}{s.session_id}", Path(s.project_path)),
            env={
                agent_process.PLACEHOLDERS["project_path"]: s.project_path,
                agent_process.PLACEHOLDERS["thread_id"]: s.thread_id,
            },
        )
        try:
            active = await self.manager.transition(
                s.session_id,
                s.status,
                SessionStatus.ACTIVE,
                context={"runs": s.runs + 1},
                process=proc.identity,
            )
        except BaseException:
            await agent_process.stop(proc.identity, self._config.stop_timeout_seconds)
            raise
        self._running[s.session_id] = proc
        self._watchers[s.session_id] = asyncio.create_task(self._watch(proc))
        return active

    async def pause(self, session_id: str) -> SessionRecord:
        s = await self.manager.get(session_id)
        return await self._leave_active(s, SessionStatus.PAUSED)

    async def terminate(self, session_id: str) -> SessionRecord:
        s = await self.manager.get(session_id)
        if s.status is SessionStatus.ACTIVE:
            return await self._leave_active(s, SessionStatus.TERMINATED)
        return await self.manager.transition(s.session_id, s.status, SessionStatus.TERMINATED)

    async def close(self) -> None:
        """Kernel shutdown: agents are stopped and their sessions paused, to resume later."""
        for session_id in list(self._running):
            with contextlib.suppress(PfarError):
                await self.pause(session_id)

    async def _leave_active(self, s: SessionRecord, to: SessionStatus) -> SessionRecord:
        if s.status is not SessionStatus.ACTIVE:
            return await self.manager.transition(s.session_id, s.status, to)  # refused, named
        watcher = self._watchers.pop(s.session_id, None)
        if watcher is not None:
            watcher.cancel()
        self._running.pop(s.session_id, None)
        if s.process:
            await agent_process.stop(s.process, self._config.stop_timeout_seconds)
        return await self.manager.transition(s.session_id, SessionStatus.ACTIVE, to)

    async def _watch(self, proc: agent_process.AgentProcess) -> None:
        """An agent that exits on its own leaves its session PAUSED, with the exit code."""
        code = await proc.wait()
        self._running.pop(proc.session_id, None)
        self._watchers.pop(proc.session_id, None)
        with contextlib.suppress(PfarError):
            await self.manager.transition(
                proc.session_id,
                SessionStatus.ACTIVE,
                SessionStatus.PAUSED,
                context={"last_exit_code": code},
            )

    def _argv(self, s: SessionRecord) -> list[str]:
        if not self._config.agent_command:
            raise PfarError(
                "no agent command is configured: set [sessions] agent_command in config.toml "
                '(e.g. agent_command = ["my-agent", "--project", "{project_path}"]), '
                "then `pfar reload` (a running kernel takes it without a restart)"
            )
        fill = {
            "session_id": s.session_id,
            "project_path": s.project_path,
            "thread_id": s.thread_id,  # checked at creation; a row from before may hold anything
        }
        template = list(self._config.agent_command)
        if s.runs > 0:
            template += self._config.resume_args
        return agent_process.fill_argv(template, fill)
