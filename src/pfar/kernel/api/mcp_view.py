"""The MCP servers as the owner is shown them (`pfar mcp list`): each server's state
(not started, running, restarting, failed and why) and its tools with what each is to
the journal. Without a kernel, from config.toml alone: no server runs then."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config.mcp import McpConfig
from .arguments import NoArgs
from .command import Command
from .wire import Wire

if TYPE_CHECKING:
    from ...tools.mcp.servers import McpServers


@dataclass(frozen=True, slots=True)
class McpToolView:
    name: str  # the name the model calls it by (mcp__<server>__<tool>)
    server_name: str  # the server's own
    semantics: str  # read / idempotent / write
    # True: asked at every call; False: never asked; None: as any tool ([loop] rules)
    asks: bool | None


@dataclass(frozen=True, slots=True)
class McpServerView:
    name: str
    transport: str  # stdio / http
    # not started / starting / running / restarting / failed / stopped / disabled, or
    # "not running" (no kernel runs)
    state: str
    why: str | None  # a failed server's reason, or its last stop's
    restarts: int
    pid: int | None
    tools: tuple[McpToolView, ...]
    dropped: tuple[str, ...]  # tools left out for a bad schema, each with why


def live(
    servers: McpServers | None, config: McpConfig, redact: Callable[[str], str]
) -> list[McpServerView]:
    """A running kernel's servers (a server's words pass the redactor)."""
    if servers is None:  # none enabled
        return configured(config, "not started")
    return [
        McpServerView(
            v.name,
            v.transport,
            str(v.state),
            redact(v.why) if v.why else None,
            v.restarts,
            v.pid,
            tuple(McpToolView(t.name, t.server_name, t.semantics, t.asks) for t in v.tools),
            v.dropped,
        )
        for v in servers.views()
    ]


def configured(config: McpConfig, state: str) -> list[McpServerView]:
    """The servers config.toml names, none of them running."""
    return [
        McpServerView(
            s.name,
            "stdio" if s.command is not None else "http",
            state if s.enabled else "disabled",
            None,
            0,
            None,
            (),
            (),
        )
        for s in config.servers
    ]


# the control socket's `mcp` op (requests.py lists it with the others)
MCP = Command(
    "mcp",
    NoArgs,
    lambda o, _: o.mcp_servers(),
    while_shutting_down=True,
    reply=Wire(list[McpServerView]),
)
