"""One MCP server, supervised: started at its first use, restarted with backoff when it
dies, ended when its kernel stops.

A call in flight when the server dies gets an error (the SDK wakes it with "connection
closed"): the call is never sent again on its own, since a write may have had its
effect; the step executor records the error as the call's result. The server is
started again, after 1 s, then 2, 4 ... up to a minute; a server whose first start
fails, or that fails to come back five times in a row, is `failed` (why is kept, and
reported once) and the other servers keep working.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, MCPError, types
from mcp.shared.message import SessionMessage

from ...config.mcp import McpServerConfig
from ...errors import ToolFailed

log = logging.getLogger("pfar.mcp")

State = Literal["not started", "starting", "running", "restarting", "failed", "stopped"]
Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception] | Any,
    MemoryObjectSendStream[SessionMessage] | Any,
    Process | None,
]
# opens a server's streams; calls its argument when the server is gone (stdio: its
# stdout ended)
Opener = Callable[[Callable[[], None]], AbstractAsyncContextManager[Streams]]

_RETRIES = 5  # starts in a row that may fail after a death before the server is failed
_MAX_DELAY = 60.0
_POLL = 0.2  # how often a running server's process is looked at
_CLIENT = types.Implementation(name="pfar", version="1")
_CLOSED = types.CONNECTION_CLOSED


@dataclass(frozen=True, slots=True)
class Listed:
    """One tool as its server listed it (its schema checked)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: types.ToolAnnotations | None


class McpServer:
    def __init__(
        self,
        config: McpServerConfig,
        opener: Opener,
        *,
        on_listed: Callable[[McpServer], Awaitable[None]],
        on_failed: Callable[[McpServer], Awaitable[None]],
    ) -> None:
        self.config = config
        self.name = config.name
        self.state: State = "not started"
        self.why: str | None = None  # a failed server's reason, or the last death's
        self.tools: tuple[Listed, ...] = ()
        self.dropped: tuple[str, ...] = ()  # tools left out for a bad schema, each with why
        self.pid: int | None = None
        self.restarts = 0
        self._open = opener
        self._on_listed = on_listed
        self._on_failed = on_failed
        self._session: ClientSession | None = None
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._lost: Callable[[], None] = lambda: None  # says so (see _run_once)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start supervising (once); the server comes up in the background."""
        if self._task is None and not self._closing.is_set():
            self._set("starting")
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def ready(self) -> None:
        """Wait until the server runs, failed, or was stopped."""
        self.start()
        while self.state in ("starting", "restarting"):
            await self._changed.wait()

    async def started(self) -> None:
        """Wait for its first start only: one being started again after a death is
        waited for by the call that needs it, not by every task."""
        self.start()
        while self.state == "starting":
            await self._changed.wait()

    async def call(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
        await self.ready()
        session, lost = self._session, self._lost  # this connection's, whatever comes next
        if self.state != "running" or session is None:
            why = f": {self.why}" if self.why else ""
            raise ToolFailed(f"MCP server {self.name!r} is {self.state}{why}; the tool did not run")
        try:
            result = await session.call_tool(tool, args)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                # its connection is gone (a stdio server's stdout ended, an HTTP
                # server stopped answering): the next call waits for a new one
                lost()
                raise ToolFailed(
                    f"MCP server {self.name!r} stopped during the call, which may or may not "
                    "have had its effect; it is being started again"
                ) from None
            raise ToolFailed(f"MCP server {self.name!r}: {exc.error.message}") from None
        if not isinstance(result, types.CallToolResult):
            raise ToolFailed(f"MCP server {self.name!r} answered {tool} with no tool result")
        return result

    async def close(self) -> None:
        self._closing.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), 10)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.state != "failed":
            self._set("stopped")

    def _set(self, state: State) -> None:
        self.state = state
        self._changed.set()
        self._changed = asyncio.Event()

    async def _supervise(self) -> None:
        delay, failures, ever_ran = 1.0, 0, False
        while not self._closing.is_set():
            ran, why = await self._run_once()
            if self._closing.is_set():
                return
            ever_ran = ever_ran or ran
            failures = 0 if ran else failures + 1
            if not ever_ran or failures >= _RETRIES:
                self.why = why
                self._set("failed")
                await self._on_failed(self)
                return
            if ran:
                delay = 1.0
                log.warning("MCP server %s stopped (%s); starting it again", self.name, why)
            self.why = why
            self.restarts += 1
            self._set("restarting")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)
            delay = min(delay * 2, _MAX_DELAY)

    async def _run_once(self) -> tuple[bool, str]:
        """Start the server, list its tools, serve until it dies or the kernel stops:
        (whether it came up, why it ended)."""
        ran = False
        process: Process | None = None
        gone = asyncio.Event()  # its transport ended

        def lost() -> None:
            gone.set()
            if self.state == "running":  # no call is sent to it from now on
                self._session = None
                self._set("restarting")

        self._lost = lost
        try:
            async with (
                self._open(lost) as (read, write, process),
                self._session_of(read, write) as s,
            ):
                with anyio.fail_after(self.config.start_timeout_seconds):
                    await s.initialize()
                    listed = await _list(s)
                self.tools, self.dropped = _checked(listed)
                self.pid = process.pid if process is not None else None
                self._session = s
                ran = True
                await self._on_listed(self)
                self._set("running")
                return True, await self._until_gone(process, gone)
        except Exception as exc:  # a server's failure, never the kernel's
            leaves = _leaves(exc)
            closed = all(
                isinstance(e, MCPError) and e.code == types.CONNECTION_CLOSED for e in leaves
            )
            if closed and not ran and process is not None and process.returncode is not None:
                return ran, f"its process exited with {process.returncode}"
            if any(isinstance(e, TimeoutError) for e in _leaves(exc)):
                return ran, f"it did not start within {self.config.start_timeout_seconds:g} s"
            return ran, "; ".join(_said(e) for e in _leaves(exc))
        finally:
            self._session = None
            self.pid = None

    @contextlib.asynccontextmanager
    async def _session_of(self, read: Any, write: Any) -> AsyncIterator[ClientSession]:
        async with ClientSession(read, write, client_info=_CLIENT) as session:
            yield session

    async def _until_gone(self, process: Process | None, gone: asyncio.Event) -> str:
        while not self._closing.is_set():
            if process is not None and process.returncode is not None:
                return f"its process exited with {process.returncode}"
            if gone.is_set() and process is None:
                return "its connection ended"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), _POLL)
        return "the kernel stopped"


async def _list(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _checked(tools: list[types.Tool]) -> tuple[tuple[Listed, ...], tuple[str, ...]]:
    """The tools whose input schema a model can be given; the others, each with why."""
    good: list[Listed] = []
    bad: list[str] = []
    for tool in tools:
        problem = schema_problem(tool.input_schema)
        if problem is not None:
            bad.append(f"{tool.name}: {problem}")
            continue
        good.append(Listed(tool.name, tool.description or "", tool.input_schema, tool.annotations))
    return tuple(good), tuple(bad)


def schema_problem(schema: object) -> str | None:
    """Why a listed input schema is unusable, or None: an object schema whose properties
    are schemas and whose required names are strings, as JSON."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its input schema is not an object schema ({"type": "object", ...})'
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, dict) for v in props.values()):
        return "its input schema's properties are not schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its input schema's required is not a list of names"
    try:
        json.dumps(schema)
    except (TypeError, ValueError):
        return "its input schema is not JSON"
    return None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def _said(exc: BaseException) -> str:
    """An error on one line of at most 500 characters (a validation error's lines and
    its pointers to the docs run long)."""
    if isinstance(exc, OSError | ToolFailed):
        text = str(exc)
    elif isinstance(exc, MCPError):
        text = exc.error.message
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= 500 else text[:500] + "…"
