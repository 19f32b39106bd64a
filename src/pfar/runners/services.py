"""What a runner is given to advance a task: the journal, tools, model, templates, policy."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import LoopConfig
from ..hooks import NO_HOOKS, Hooks
from ..journal.store import Store
from ..llm.events import ChatEvent
from ..llm.proxy import InferenceProxy
from ..policy.redact import Redactor
from ..tools.base import Resource
from ..tools.registry import ToolRegistry
from ..tools.sandbox import Sandbox
from .templates import TemplateRegistry

if TYPE_CHECKING:
    from ..tools.mcp.servers import McpServers
    from .loop.permissions import Policy


@dataclass(slots=True)
class Services:
    journal: Store
    tools: ToolRegistry
    model: InferenceProxy  # the one chat interface to models
    templates: TemplateRegistry
    secret: Callable[[str], str | None]
    redactor: Redactor
    workspace: Callable[[str], Path]
    approval_timeout_seconds: float
    credential_timeout_seconds: float
    notify_owner: Callable[[], None]
    # the agentic loop's settings, its compiled policy, and who watches its output live
    loop: LoopConfig = field(default_factory=LoopConfig)
    loop_policy: Policy | None = None  # compiled from `loop` when not given
    loop_events: Callable[[str, ChatEvent], None] | None = None
    # start advancing another task now (a subtask the runner started, a parent it woke)
    advance: Callable[[str], None] | None = None
    # before a subtask is created: whether it starts at once (True) or waits for a slot
    # (kernel/admission.py), and undoing that when no new task came of it
    enter: Callable[[str, int], bool] | None = None
    forget: Callable[[str], None] | None = None
    # resource locks (seed 001, 4.3): holds what a loop call declares while it runs;
    # orchestration provides them, and without them no call waits on another
    hold: Callable[[str, tuple[Resource, ...]], AbstractAsyncContextManager[None]] | None = None
    # the owner's hook handlers (docs/hooks.md), fired where a task decides something
    hooks: Hooks = NO_HOOKS
    # the sandbox a task's commands run in ([sandbox] enabled), by task and directory
    sandbox: Callable[[str, Path], Sandbox] | None = None
    # the MCP servers whose tools loop tasks are offered (tools/mcp/); None: none configured
    mcp: McpServers | None = None
