"""Talking to a running kernel over its control socket."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Generator
from typing import Any, TypeVar

from ..errors import BadRequest, KernelNotReady, KernelNotRunning, PfarError
from ..kernel.api.arguments import NoArgs
from ..kernel.api.command import Command
from ..kernel.api.requests import PING
from ..kernel.lines import MAX_LINE, MAX_LINE_TEXT
from ..kernel.peers import read_token
from ..vault.home import Home, HomeLock

A = TypeVar("A")
R = TypeVar("R")


class RemoteError(PfarError):
    """The kernel refused a request; `remote_code` is its error's stable code."""

    code = "remote"

    def __init__(self, remote_code: str, message: str) -> None:
        super().__init__(message)
        self.remote_code = remote_code


class RemoteBadRequest(RemoteError, BadRequest):
    """The kernel refused a request's field: a BadRequest here too, naming the same
    field, so a command refuses it alike whether a kernel answered or its vault did."""

    code = BadRequest.code

    def __init__(self, remote_code: str, message: str, field: str, problem: str) -> None:
        PfarError.__init__(self, message)  # the kernel's words, whatever its refusal's kind
        self.remote_code, self.field, self.problem = remote_code, field, problem


def _refusal(err: Any) -> RemoteError:
    """The kernel's `{"code", "message"}` (and, for a bad field, its name and problem)."""
    if not isinstance(err, dict):
        return RemoteError("error", "unknown error")
    code, message = str(err.get("code", "error")), str(err.get("message", "unknown error"))
    field, problem = err.get("field"), err.get("problem")
    if isinstance(field, str) and isinstance(problem, str):
        return RemoteBadRequest(code, message, field, problem)
    return RemoteError(code, message)


def kernel_running(home: Home) -> bool:
    try:
        send(home, PING, NoArgs(), timeout=2.0)
    except KernelNotRunning:
        return False
    return True


def send(home: Home, command: Command[A, R], arguments: A, timeout: float | None = 60.0) -> R:
    """Run `command` on the kernel; its answer read back into the record its verb
    returned (RemoteError if it was refused, BadReply if the answer does not fit)."""
    return command.reply.parse(call(home, command.request(arguments), timeout), command.op)


def call(home: Home, request: dict[str, Any], timeout: float | None = 60.0) -> Any:
    """One request and its answer; `timeout` None waits as long as the kernel takes."""
    _check_size(json.dumps(request).encode() + b"\n")
    sock = _connect(home)
    sock.settimeout(timeout)
    try:
        # signed once connected: a kernel that was starting wrote its boot's token since
        data = json.dumps(_signed(home, request)).encode() + b"\n"
        _check_size(data)
        # a kernel that refused the connection (busy) said why first: read it
        with contextlib.suppress(BrokenPipeError):
            sock.sendall(data)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise PfarError("the kernel closed the control connection")
            buf += chunk
    except TimeoutError:
        raise PfarError(
            f"the kernel did not answer within {timeout:g}s; it goes on with the request"
        ) from None
    except OSError as exc:
        raise PfarError(f"the kernel closed the control connection ({exc.strerror})") from None
    finally:
        sock.close()
    response = json.loads(buf)
    if not response.get("ok"):
        raise _refusal(response.get("error"))
    return response.get("result")


def _check_size(data: bytes) -> None:
    if len(data) > MAX_LINE:
        raise PfarError(
            f"the request is {len(data)} bytes; the kernel takes at most {MAX_LINE_TEXT}; "
            "nothing was sent"
        )


def stream(home: Home, request: dict[str, Any]) -> Generator[dict[str, Any], None, None]:
    """A streaming op (`attach`): each {"shown": ...} line's object, as it comes, until the
    kernel's closing answer (RemoteError if that is a refusal). Closing the iterator
    hangs up, which is how a viewer detaches."""
    sock = _connect(home)
    try:
        sock.sendall(json.dumps(_signed(home, request)).encode() + b"\n")
        with sock.makefile("rb") as lines:
            for line in lines:
                message = json.loads(line)
                if "shown" in message:
                    yield message["shown"]
                    continue
                if not message.get("ok"):
                    raise _refusal(message.get("error"))
                return
        raise PfarError("the kernel closed the connection (it is shutting down)")
    finally:
        sock.close()


# How long a command waits for a kernel that holds its home but does not answer yet (it
# is starting: recovery, a slow provider, a loaded machine). 0: do not wait.
START_WAIT_ENV = "PFAR_START_WAIT"
START_WAIT_SECONDS = 60.0


def start_wait_seconds() -> float:
    raw = os.environ.get(START_WAIT_ENV, "")
    if not raw:
        return START_WAIT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        raise PfarError(
            f"{START_WAIT_ENV}={raw!r}: not a number of seconds (e.g. 60, or 0 not to wait)"
        ) from None
    if not seconds >= 0:
        raise PfarError(f"{START_WAIT_ENV}={raw!r}: must be 0 or more seconds")
    return seconds


def _connect(home: Home) -> socket.socket:
    """A connection to the kernel's control socket. A kernel that holds the home but has
    no socket yet is starting: wait for it (bounded, said once on stderr), so that
    `pfar run & pfar submit ...` works however long the start takes."""
    path = str(home.control_socket)
    deadline: float | None = None
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if not _lock_held(home):
                raise KernelNotRunning(str(home.root)) from None
        except OSError as exc:
            sock.close()
            raise PfarError(f"cannot reach the kernel at {path}: {exc}") from None
        if deadline is None:
            wait = start_wait_seconds()
            if wait == 0:
                raise KernelNotReady(str(home.root))
            deadline = time.monotonic() + wait
            sys.stderr.write(
                f"pfar: the kernel on {home.root} is starting; waiting up to {wait:g}s "
                f"for it to answer (set {START_WAIT_ENV} to change)\n"
            )
            sys.stderr.flush()
        elif time.monotonic() >= deadline:
            raise KernelNotReady(str(home.root))
        time.sleep(0.1)


def _signed(home: Home, request: dict[str, Any]) -> dict[str, Any]:
    """The request with this boot's token (the kernel refuses one without it)."""
    token = read_token(home.control_token)
    return request if token is None else {**request, "token": token}


def _lock_held(home: Home) -> bool:
    try:
        return HomeLock(home).is_held_elsewhere()
    except OSError:
        return False
