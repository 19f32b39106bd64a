"""The kernel's MCP servers: each started at its first use (the first loop task that
runs), its tools registered under their pfar names, all ended when the kernel stops.

Every tool of an enabled server that runs is offered to loop tasks, after `[loop]
tools`; `[loop.policy] blocked_tools` refuses one by its pfar name, and `enabled =
false` turns a server off. A server that fails is reported to the owner once, by name,
and the others keep working.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp.client.streamable_http import streamable_http_client

from ...config.mcp import McpConfig, McpServerConfig
from ..registry import ToolRegistry
from . import launch, stdio
from .naming import tool_name
from .semantics import rules_of
from .server import McpServer, Opener, State, Streams
from .tool import McpTool, make_tool

log = logging.getLogger("pfar.mcp")

_GONE = ("failed", "stopped")


@dataclass(frozen=True, slots=True)
class ToolView:
    name: str  # pfar's
    server_name: str  # the server's own
    semantics: str  # read / idempotent / write
    asks: bool | None
    destructive: bool


@dataclass(frozen=True, slots=True)
class ServerView:
    """A server as `pfar mcp list` shows it."""

    name: str
    transport: str  # "stdio" or "http"
    enabled: bool
    state: State | str
    why: str | None
    restarts: int
    pid: int | None
    tools: tuple[ToolView, ...]
    dropped: tuple[str, ...]


class McpServers:
    def __init__(
        self,
        config: McpConfig,
        tools: ToolRegistry,
        *,
        servers_dir: Path,
        home_tag: str,
        secret: Callable[[str], str | None],
        redact: Callable[[str], str],
        sandboxer: launch.Sandboxer | None = None,
        report: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._config = config
        self._registry = tools
        self._dir = servers_dir
        self._home_tag = home_tag
        self._secret = secret
        self._redact = redact
        self._sandboxer = sandboxer
        self._report = report
        self._offered: dict[str, McpTool] = {}
        self.servers = {
            s.name: McpServer(s, self._opener(s), on_listed=self._listed, on_failed=self._failed)
            for s in config.servers
            if s.enabled
        }

    def __bool__(self) -> bool:
        return bool(self.servers)

    async def ready(self) -> None:
        """Start every server not started yet and wait until each first start ended
        (it runs, or failed)."""
        if self.servers:
            await asyncio.gather(*(s.started() for s in self.servers.values()))

    def offered(self) -> list[str]:
        """The pfar names of the tools of every server that runs, or is being started
        again (a call waits for it); not those of a failed one."""
        return [n for n, t in self._offered.items() if t.server.state not in _GONE]

    def knows(self, name: str) -> bool:
        return name in self._offered

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.servers.values()))

    def views(self) -> list[ServerView]:
        out = []
        for cfg in self._config.servers:
            server = self.servers.get(cfg.name)
            tools = tuple(
                ToolView(n, t.listed.name, t.rules.kind, t.rules.asks, t.rules.destructive)
                for n, t in self._offered.items()
                if t.server is server
            )
            out.append(
                ServerView(
                    cfg.name,
                    "stdio" if cfg.command is not None else "http",
                    cfg.enabled,
                    server.state if server is not None else "disabled",
                    server.why if server is not None else None,
                    server.restarts if server is not None else 0,
                    server.pid if server is not None else None,
                    tools,
                    server.dropped if server is not None else (),
                )
            )
        return out

    async def _listed(self, server: McpServer) -> None:
        overrides = server.config.tools
        for listed in server.tools:
            name = tool_name(server.name, listed.name)
            rules = rules_of(listed.annotations, overrides.get(listed.name))
            tool = make_tool(name, server, listed, rules)
            self._offered[name] = tool
            self._registry.register(tool)
        if server.dropped and not server.restarts:  # said once, not at each restart
            await self._say(
                f"MCP server {server.name}: tools left out for a bad schema: "
                + "; ".join(server.dropped)
            )

    async def _failed(self, server: McpServer) -> None:
        await self._say(
            f"MCP server {server.name} failed: {server.why}. Its tools are not offered "
            "until the kernel starts again (fix it in config.toml [[mcp.servers]])."
        )

    async def _say(self, text: str) -> None:
        """Once, to the log and the owner (a server's words pass the redactor)."""
        log.error("%s", self._redact(text))
        if self._report is not None:
            await self._report(self._redact(text))

    def _opener(self, cfg: McpServerConfig) -> Opener:
        if cfg.command is not None:
            return lambda gone: self._stdio(cfg, gone)
        return lambda gone: self._http(cfg)

    @asynccontextmanager
    async def _stdio(
        self, cfg: McpServerConfig, gone: Callable[[], None]
    ) -> AsyncIterator[Streams]:
        env = launch.environment(cfg, self._home_tag, self._secret)
        cwd = launch.workdir(cfg, self._dir)
        argv = launch.argv(cfg, cwd, self._sandboxer)
        async with stdio.open_stdio(argv, env, cwd, cfg.name, self._redact, gone) as pipes:
            yield pipes.read, pipes.write, pipes.process

    @asynccontextmanager
    async def _http(self, cfg: McpServerConfig) -> AsyncIterator[Streams]:
        assert cfg.url is not None
        where = f"mcp.servers {cfg.name!r} headers"
        headers = {
            k: launch.expand(v, self._secret, f"{where}.{k}") for k, v in cfg.headers.items()
        }
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
            streamable_http_client(cfg.url, http_client=client) as (read, write),
        ):
            yield read, write, None
