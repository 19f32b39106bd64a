"""Sections for the programs pfar starts outside itself: a session's agent
(`[sessions]`), the sandbox around commands (`[sandbox]`) and hook handlers (`[[hooks]]`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from ..hook_points import TOOL_POINTS, parse_point
from .section import Section


class SessionsConfig(Section):
    """Long-lived agent sessions: the external agent command each ACTIVE session runs."""

    # argv; {session_id}, {project_path} and {thread_id} are filled in
    agent_command: list[str] = []
    # appended when a session that has run before is resumed, e.g. ["--resume", "{session_id}"]
    resume_args: list[str] = []
    stop_timeout_seconds: float = Field(10, gt=0, le=3600)


class SandboxConfig(Section):
    """`[sandbox]` (R7): commands run in a bubblewrap sandbox (docs/sandbox.md)."""

    enabled: bool = False
    # the network inside a sandbox (off: only the loopback of its own namespace)
    network: bool = False
    # variables of the kernel's environment a sandboxed command gets besides PATH, HOME,
    # USER, LANG, TERM, TZ ... (e.g. a session agent's "ANTHROPIC_API_KEY"); the rest
    # (agent sockets, tokens exported where `pfar run` started) stays out
    pass_env: list[str] = []


class HookConfig(Section):
    """One `[[hooks]]` entry: a handler at a hook point (docs/hooks.md)."""

    point: str
    command: str | None = None  # a shell command: the event on stdin, a decision on stdout
    python: str | None = None  # module:function
    timeout_seconds: float = Field(10, gt=0, le=600)
    tools: list[str] = []  # at a tool's points: only for these tools (empty: every tool)

    @model_validator(mode="after")
    def _one_handler(self) -> HookConfig:
        point = parse_point(self.point)  # ValueError naming the points
        if (self.command is None) == (self.python is None):
            raise ValueError("give exactly one of command or python")
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")
        if self.tools and point not in TOOL_POINTS:
            raise ValueError(f"tools is only for a tool's hook points, and {point} is none")
        return self
