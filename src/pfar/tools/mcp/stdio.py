"""A stdio server's process and the session's streams over its pipes.

pfar starts the process itself, not through the SDK's `stdio_client`, for what the
kernel must hold of it: its process id (its group is ended when the kernel stops),
the moment it dies (a call in flight gets an error, the server is restarted), and its
stderr, which reaches the log only through the redactor. The wire is the protocol's:
one JSON-RPC message a line, parsed and written by the SDK's own types.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

log = logging.getLogger("pfar.mcp")

# a server's stderr line longer than this is cut in the log
_LINE = 2000
# after its stdin closes, how long a server has to end before its group is killed
_GRACE = 2.0


@dataclass(slots=True)
class Pipes:
    """The session's ends of a running server, and the process behind them."""

    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    process: Process


@asynccontextmanager
async def open_stdio(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    name: str,
    redact: Callable[[str], str],
    gone: Callable[[], None],
) -> AsyncIterator[Pipes]:
    """Start `argv` in a process group of its own; end the group on the way out.
    `gone` is called as its stdout ends (it died, or closed it): at once, so that no
    call is sent to a server that is no longer there."""
    process = await anyio.open_process(
        argv, env=env, cwd=cwd, stdin=PIPE, stdout=PIPE, stderr=PIPE, start_new_session=True
    )
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](16)

    async def stdout() -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async with to_session:
                with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if line.strip():
                                await to_session.send(_parse(line))
        finally:
            gone()

    async def stderr() -> None:
        assert process.stderr is not None
        buffer = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            async for chunk in process.stderr:
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    text = line.decode(errors="replace").rstrip()[:_LINE]
                    if text:  # what a server says there is mostly its trouble
                        log.warning("MCP server %s said: %s", name, redact(text))

    async def stdin() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout)
        tg.start_soon(stderr)
        tg.start_soon(stdin)
        try:
            yield Pipes(read, write, process)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            tg.cancel_scope.cancel()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # the session reports it; the line may hold anything
        return ValueError(f"not a JSON-RPC message ({len(line)} bytes): {type(exc).__name__}")


async def _stop(process: Process) -> None:
    """Close its stdin, give it a moment, then SIGKILL its whole group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(_GRACE):
        await process.wait()
    kill_group(process.pid)  # what it started goes with it
    with anyio.move_on_after(_GRACE):
        await process.wait()


def kill_group(pid: int) -> None:
    """SIGKILL the group `pid` leads (its own: it was started in a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
