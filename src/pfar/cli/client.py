"""Talking to a running kernel over its control socket."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Generator
from typing import Any, TypeVar

from ..errors import KernelNotReady, KernelNotRunning, PfarError
from ..kernel.api.requests import PING, Command, NoArgs
from ..kernel.lines import MAX_LINE, MAX_LINE_TEXT
from ..kernel.peers import read_token
from ..vault.home import Home, HomeLock

A = TypeVar("A")


class RemoteError(PfarError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def kernel_running(home: Home) -> bool:
    try:
        send(home, PING, NoArgs(), timeout=2.0)
    except KernelNotRunning:
        return False
    return True


def send(home: Home, command: Command[A], arguments: A, timeout: float = 60.0) -> Any:
    """Run `command` on the kernel; its result as JSON (RemoteError if it was refused)."""
    return call(home, command.request(arguments), timeout)


def call(home: Home, request: dict[str, Any], timeout: float = 60.0) -> Any:
    path = str(home.control_socket)
    data = json.dumps(_signed(home, request)).encode() + b"\n"
    if len(data) > MAX_LINE:
        raise PfarError(
            f"the request is {len(data)} bytes; the kernel takes at most {MAX_LINE_TEXT}; "
            "nothing was sent"
        )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        if _lock_held(home):
            raise KernelNotReady(str(home.root)) from None
        raise KernelNotRunning(str(home.root)) from None
    except OSError as exc:
        sock.close()
        raise PfarError(f"cannot reach the kernel at {path}: {exc}") from None
    try:
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
        err = response.get("error", {})
        raise RemoteError(err.get("type", "Error"), err.get("message", "unknown error"))
    return response.get("result")


def stream(home: Home, request: dict[str, Any]) -> Generator[dict[str, Any], None, None]:
    """A streaming op (`attach`): each {"shown": ...} line's object, as it comes, until the
    kernel's closing answer (RemoteError if that is a refusal). Closing the iterator
    hangs up, which is how a viewer detaches."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(home.control_socket))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        if _lock_held(home):
            raise KernelNotReady(str(home.root)) from None
        raise KernelNotRunning(str(home.root)) from None
    try:
        sock.sendall(json.dumps(_signed(home, request)).encode() + b"\n")
        with sock.makefile("rb") as lines:
            for line in lines:
                message = json.loads(line)
                if "shown" in message:
                    yield message["shown"]
                    continue
                if not message.get("ok"):
                    err = message.get("error", {})
                    raise RemoteError(err.get("type", "Error"), err.get("message", "unknown"))
                return
        raise PfarError("the kernel closed the connection (it is shutting down)")
    finally:
        sock.close()


def _signed(home: Home, request: dict[str, Any]) -> dict[str, Any]:
    """The request with this boot's token (the kernel refuses one without it)."""
    token = read_token(home.control_token)
    return request if token is None else {**request, "token": token}


def _lock_held(home: Home) -> bool:
    try:
        return HomeLock(home).is_held_elsewhere()
    except OSError:
        return False
