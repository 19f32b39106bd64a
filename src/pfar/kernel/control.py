"""The control socket: `$PFAR_HOME/control.sock`, owner-only, one JSON object per line.

Request:  {"op": "submit", "template": "...", "text": "...", "event_id": "..."}
Response: {"ok": true, "result": {...}}  or  {"ok": false, "error": {"type": ..., "message": ...}}

Secrets (a credential) travel in the request body, never in argv or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import asdict
from typing import Any

from ..errors import BadRequest, PfarError, ShuttingDown
from .kernel import Kernel
from .lines import MAX_LINE_TEXT, read_lines

log = logging.getLogger("pfar.control")

# what a shutting-down kernel still answers: the socket stays open until its tasks are done
_WHILE_SHUTTING_DOWN = {"ping", "status", "wait_idle", "shutdown"}
MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, 104 on macOS


_TOO_LONG = {
    "ok": False,
    "error": {"type": "BadRequest", "message": f"request over {MAX_LINE_TEXT}; nothing was done"},
}


class ControlServer:
    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self.shutdown_requested = asyncio.Event()

    async def start(self) -> None:
        path = self._kernel.home.control_socket
        if len(str(path).encode()) > MAX_SOCKET_PATH:
            raise PfarError(
                f"{path}: too long for a unix socket ({len(str(path).encode())} bytes, at most "
                f"{MAX_SOCKET_PATH}); use a shorter PFAR_HOME"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale from a killed kernel; we hold the home lock
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._client, path=str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for client in list(self._clients):  # an idle client must not hold shutdown
                client.close()
            await self._server.wait_closed()
        path = self._kernel.home.control_socket
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. the home was made unwritable: shutdown goes on
            log.error("could not remove %s: %s", path, exc.strerror or exc)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            async for line in read_lines(reader):
                response = await self._handle(line) if line is not None else _TOO_LONG
                writer.write(json.dumps(response).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _handle(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                raise ValueError("a request is a JSON object with an 'op'")
            if not self._kernel.accepting and request["op"] not in _WHILE_SHUTTING_DOWN:
                raise ShuttingDown()
            result = await self._dispatch(request)
        except PfarError as exc:
            return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
        except (ValueError, KeyError, TypeError) as exc:
            return {"ok": False, "error": {"type": "BadRequest", "message": str(exc)}}
        except Exception as exc:  # the client gets an answer, whatever went wrong
            log.exception("control request failed")
            return {
                "ok": False,
                "error": {"type": "InternalError", "message": f"{type(exc).__name__}: {exc}"},
            }
        return {"ok": True, "result": result}

    async def _dispatch(self, req: dict[str, Any]) -> Any:
        k = self._kernel
        op = req["op"]
        if op == "ping":
            return {"boot_id": k.boot_id, "pid": os.getpid()}
        if op == "status":
            return asdict(k.statistics())
        if op == "submit":
            text = _string(req, "text")
            task = await k.submit(
                _string(req, "template"),
                text,
                # checked by submit, never str()-ed: True and "True" are different events
                event_id=req.get("event_id"),
                adapter=_string(req, "adapter", "cli"),
            )
            return {
                "task_id": task.task_id,
                "state": task.state.value,
                "redacted": k.redactor.found(text),
            }
        if op == "answer":
            a, changed = await k.answer(str(req["approval_id"]), str(req["decision"]))
            return {
                "approval_id": a.approval_id,
                "status": a.status.value,
                "decision": a.decision,
                "changed": changed,
                "task_id": a.task_id,
            }
        if op in _HOLDS:
            result = await getattr(k, _HOLDS[op])(_string(req, "task_id"))
            return result.to_json()
        if op == "credential":
            task = await k.provide_credential(str(req["prompt_id"]), str(req["secret"]))
            return {"task_id": task.task_id, "state": task.state.value}
        if op == "secret_set":
            k.set_secret(str(req["name"]), str(req["value"]))
            return {"name": req["name"]}
        if op == "workflow_start":
            task = await k.start_workflow(str(req["definition"]), str(req["directory"]))
            return {"task_id": task.task_id, "state": task.state.value}
        if op == "workflow_resume":
            task = await k.resume_workflow(str(req["directory"]))
            return {"task_id": task.task_id, "state": task.state.value}
        if op == "session_new":
            return k.sessions.create(str(req["project_path"]), str(req["thread_id"])).to_json()
        if op == "session_resume":
            return (await k.sessions.resume(str(req["session_id"]))).to_json()
        if op == "session_pause":
            return (await k.sessions.pause(str(req["session_id"]))).to_json()
        if op == "session_terminate":
            return (await k.sessions.terminate(str(req["session_id"]))).to_json()
        if op == "wait_idle":
            await k.wait_idle()
            return {}
        if op == "shutdown":
            self.shutdown_requested.set()
            return {}
        raise ValueError(f"unknown op {op!r}")


# the owner's hold on a task: op -> Kernel method
_HOLDS = {"task_cancel": "cancel_task", "task_pause": "pause_task", "task_resume": "resume_task"}


def _string(req: dict[str, Any], key: str, default: str | None = None) -> str:
    """A request field that must be a string: a list or a number is refused, not str()-ed."""
    value = req.get(key, default)
    if value is None:
        raise BadRequest(key, "is required")
    if not isinstance(value, str):
        raise BadRequest(key, f"must be a string, not {type(value).__name__}")
    return value
