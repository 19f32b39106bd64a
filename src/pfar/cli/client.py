"""Talking to a running kernel over its control socket."""

from __future__ import annotations

import json
import socket
from typing import Any

from ..errors import KernelNotRunning, PfarError
from ..vault.home import Home


class RemoteError(PfarError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def kernel_running(home: Home) -> bool:
    try:
        call(home, {"op": "ping"}, timeout=2.0)
    except KernelNotRunning:
        return False
    return True


def call(home: Home, request: dict[str, Any], timeout: float = 60.0) -> Any:
    path = str(home.control_socket)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        raise KernelNotRunning(str(home.root)) from None
    except OSError as exc:
        sock.close()
        raise PfarError(f"cannot reach the kernel at {path}: {exc}") from None
    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
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
    finally:
        sock.close()
    response = json.loads(buf)
    if not response.get("ok"):
        err = response.get("error", {})
        raise RemoteError(err.get("type", "Error"), err.get("message", "unknown error"))
    return response.get("result")
