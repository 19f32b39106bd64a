"""The control socket: `$PFAR_HOME/control.sock`, owner-only, one JSON object per line.

Request:  {"op": "submit", "template": "...", "text": "...", "event_id": "...", "token": "..."}
Response: {"ok": true, "result": {...}}  or  {"ok": false, "error": {"code": ..., "message": ...}}
(`code` is the error's stable name, errors.PfarError.code: a client branches on it)

Only the owner's `pfar` command is served (kernel/peers.py): a connection from another
user, or from a process this kernel started or a task's label marks, is refused, and
every request carries this boot's token (`control.token`, written owner-only at start;
a sandbox sees neither it nor the socket). What the owner does here is journaled as
done through the CLI, with the peer's uid and pid.

One op streams: {"op": "attach", "task_id": "...", "from_start": false} is answered by
{"shown": {...}} lines (api/attach.py) as the task goes on, then the response line
when it ends. Hanging up detaches; the task goes on.

Each op is a command of the operator API (api/requests.py: COMMANDS): its fields are
parsed once into a typed record, and its verb answers with a record whose `to_json` is
the result. While the kernel shuts down, only the ops that say so are taken: the
socket stays open until its tasks are done.

Secrets (a credential) travel in the request body, never in argv or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import time
from typing import Any

from ..errors import BadRequest, NotTheOwner, PfarError, ShuttingDown
from . import descriptors, peers
from .api.operator import Operator
from .api.requests import COMMANDS
from .kernel import Kernel
from .lines import MAX_LINE_TEXT, read_lines

log = logging.getLogger("pfar.control")

MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, 104 on macOS
REFUSAL_LOG_SECONDS = 10.0  # refused connections are logged at most this often
# connections open at once (fewer when the descriptor limit is low), and how long one
# may wait before its first request: idle connections cannot use up the descriptors
MAX_CLIENTS = 256
FIRST_REQUEST_SECONDS = 10.0
# how long closing waits for the connections' handlers to see their end
CLOSE_SECONDS = 2.0


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def _refused(exc: PfarError) -> dict[str, Any]:
    refusal = _error(exc.code, str(exc))
    if isinstance(exc, BadRequest):  # the field travels, so a client refuses as this did
        refusal["error"] |= {"field": exc.field, "problem": exc.problem}
    return refusal


_TOO_LONG = _error(BadRequest.code, f"request over {MAX_LINE_TEXT}; nothing was done")
# not an error of pfar's tree: the connection was refused before any request was read
_BUSY = _error("busy", "too many connections to the kernel; try again")


def _is_attach(line: bytes) -> bool:
    """The one op that streams (cheap to tell: the op is named near the start)."""
    if b'"attach"' not in line:
        return False
    try:
        body = json.loads(line)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("op") == "attach"


class ControlServer:
    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._operator = Operator(kernel)
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._token = ""
        self._refused = 0  # connections refused since the last log line about them
        self._refusal_logged = float("-inf")
        self._most = descriptors.share(MAX_CLIENTS)
        self._refused_lines = descriptors.Every()

    async def start(self) -> None:
        path = self._kernel.home.control_socket
        if len(str(path).encode()) > MAX_SOCKET_PATH:
            raise PfarError(
                f"{path}: too long for a unix socket ({len(str(path).encode())} bytes, at most "
                f"{MAX_SOCKET_PATH}); use a shorter PFAR_HOME"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale from a killed kernel; we hold the home lock
        # before the socket: a client that can connect can read this boot's token
        self._token = peers.new_token(self._kernel.home.control_token)
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._client, path=str(path), backlog=descriptors.ACCEPT_BURST
            )
        finally:
            os.umask(old)
        os.chmod(path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._closing = True
            await asyncio.sleep(0)  # a connection just accepted: its handler sees the close
            for client in list(self._clients):  # an idle client must not hold shutdown
                client.close()
            await self._server.wait_closed()
            # Each handler ends once it sees its connection's end. One still running when
            # the process's loop ends is cancelled, and asyncio's stream callback (3.11)
            # reports that as an unhandled error with a traceback: a fail-stop, which
            # goes straight on to exit, would end with one instead of its own message
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=CLOSE_SECONDS)
        for path in (self._kernel.home.control_socket, self._kernel.home.control_token):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:  # e.g. the home was made unwritable: shutdown goes on
                log.error("could not remove %s: %s", path, exc.strerror or exc)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.close()
            return
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
            handler.add_done_callback(self._handlers.discard)
        if len(self._clients) >= self._most:  # a flood: refused at once, its descriptor freed
            if self._refused_lines.due():
                log.warning("control socket: %d connections open; refusing more", self._most)
            writer.write(json.dumps(_BUSY).encode() + b"\n")
            writer.close()
            return
        self._clients.add(writer)
        # a client that sends no request in time is closed (its read sees the end)
        idle = asyncio.get_running_loop().call_later(FIRST_REQUEST_SECONDS, writer.close)
        try:
            operator, why = self._who(writer)
            async for line in read_lines(reader):
                idle.cancel()
                if why is not None:  # one answer saying why, then the connection ends
                    writer.write(json.dumps(_refused(NotTheOwner(why))).encode() + b"\n")
                    await writer.drain()
                    break
                if line is not None and _is_attach(line):
                    await self._attach(line, reader, writer)  # until the task ends
                    break
                response = await self._handle(operator, line) if line is not None else _TOO_LONG
                writer.write(json.dumps(response).encode() + b"\n")
                await writer.drain()
                # a client that sends nothing more in time is closed too: one request
                # must not hold a connection (of a capped number) for ever
                idle = asyncio.get_running_loop().call_later(FIRST_REQUEST_SECONDS, writer.close)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            idle.cancel()
            self._clients.discard(writer)
            writer.close()

    def _who(self, writer: asyncio.StreamWriter) -> tuple[Operator, str | None]:
        """The operator acting for this connection's peer, and why it is refused (None:
        it is the owner's). Refusals are audited and logged at a bounded rate."""
        sock = writer.get_extra_info("socket")
        peer = None if sock is None else peers.peer_of(sock)
        if peer is None:  # no peer credentials on this OS: the token alone decides
            return self._operator, None
        why = peers.refusal(peer, os.getpid())
        if why is not None:
            self._kernel.audit.log("control_refused", pid=peer.pid, uid=peer.uid, why=why)
            self._refused += 1
            now = time.monotonic()
            if now - self._refusal_logged >= REFUSAL_LOG_SECONDS:
                log.warning("control socket: %s (%d refused)", why, self._refused)
                self._refused, self._refusal_logged = 0, now
        return self._operator.acting_as(peer.actor), why

    def _check_token(self, body: object) -> None:
        given = body.get("token") if isinstance(body, dict) else None
        if not isinstance(given, str) or not hmac.compare_digest(
            given.encode(), self._token.encode()
        ):
            raise NotTheOwner(
                "the request does not carry this boot's token (the `pfar` command reads it "
                f"from {self._kernel.home.control_token.name} in the home)"
            )

    async def _attach(
        self, line: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """`attach`: one line per thing shown ({"shown": ...}), then the usual answer
        line once the task ends. A viewer that hangs up (seen at once, even while the
        task is quiet) detaches; the task goes on."""

        async def pump(task_id: str, from_start: bool) -> None:
            async for item in await self._operator.attach(task_id, from_start=from_start):
                writer.write(json.dumps({"shown": item.to_json()}).encode() + b"\n")
                await writer.drain()

        try:
            body = json.loads(line)
            self._check_token(body)
            task_id = body.get("task_id")
            if not isinstance(task_id, str):
                raise BadRequest("task_id", "is missing")
            pumping = asyncio.create_task(pump(task_id, bool(body.get("from_start"))))
            hung_up = asyncio.create_task(reader.read(1))  # b"" at the viewer's end
            try:
                await asyncio.wait({pumping, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (pumping, hung_up):
                    t.cancel()
                await asyncio.gather(hung_up, return_exceptions=True)
            if not pumping.done() or pumping.cancelled():
                await asyncio.gather(pumping, return_exceptions=True)
                return  # the viewer left
            pumping.result()  # its refusal, if any
        except PfarError as exc:
            writer.write(json.dumps(_refused(exc)).encode() + b"\n")
        else:
            writer.write(json.dumps({"ok": True, "result": {}}).encode() + b"\n")
        await writer.drain()

    async def _handle(self, operator: Operator, line: bytes) -> dict[str, Any]:
        try:
            body = json.loads(line)
            self._check_token(body)
            result = await self._run(operator, body)
        except PfarError as exc:
            return _refused(exc)
        except (ValueError, KeyError, TypeError) as exc:
            return _error(BadRequest.code, str(exc))
        except Exception as exc:  # the client gets an answer, whatever went wrong
            log.exception("control request failed")
            return _error("internal", f"{type(exc).__name__}: {exc}")
        return {"ok": True, "result": result}

    async def _run(self, operator: Operator, body: object) -> Any:
        """Parse the request once (its op names its record in COMMANDS), run its verb."""
        if not isinstance(body, dict) or not isinstance(body.get("op"), str):
            raise ValueError("a request is a JSON object with an 'op'")
        command = COMMANDS.get(body["op"])
        if command is None:
            raise BadRequest("op", f"unknown op {body['op']!r} (known: {', '.join(COMMANDS)})")
        if not self._kernel.accepting and not command.while_shutting_down:
            raise ShuttingDown()
        return await command.run(operator, command.parse(body))
