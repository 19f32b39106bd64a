"""Who is at the other end of the control socket (the trust boundary, docs/security.md).

The socket is the owner's: its mode lets only the owner's user connect, and a sandbox
does not see it at all. What runs as that same user without a sandbox (a task's
unsandboxed command, a workflow step, a session's agent, a hook) could still connect,
so each connection is also asked where it comes from: the kernel reads the peer's
credentials (SO_PEERCRED: its pid and uid) and refuses another user, and a process
that runs under this kernel or carries a task's label in its environment. A process
that double-forks away from the kernel and clears its environment passes that look:
it is a speed bump, and this boot's token (a file in the home, which a sandbox does
not see) is what a request must also carry.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from ..answers import Actor

# what the environment of a process pfar started for a task holds
_TASK_MARKS = (
    b"PFAR_SANDBOX=",
    b"PFAR_TASK_PROCESS=",
    b"PFAR_TASK_ID=",
    b"PFAR_SESSION_ID=",
)
_MAX_ANCESTORS = 256  # a pid chain longer than this is not walked further


@dataclass(frozen=True, slots=True)
class Peer:
    """The process that connected, from the kernel's own view of the socket."""

    pid: int
    uid: int

    @property
    def actor(self) -> Actor:
        return Actor("cli", f"uid {self.uid}, pid {self.pid}")


def peer_of(sock: socket.socket) -> Peer | None:
    """The connected process's credentials; None where the OS has no SO_PEERCRED."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return Peer(pid, uid)


def refusal(peer: Peer, kernel_pid: int) -> str | None:
    """Why `peer` may not act as the owner, or None."""
    if peer.uid != os.geteuid():
        return f"the connection comes from another user (uid {peer.uid})"
    pid = peer.pid
    for _ in range(_MAX_ANCESTORS):
        if pid == kernel_pid:
            return f"the connection comes from a process this kernel started (pid {peer.pid})"
        if _labelled(pid):
            return f"the connection comes from a task's process (pid {peer.pid})"
        parent = _parent(pid)
        if parent is None and pid == peer.pid:  # gone (or hidden) before it was looked at
            return f"the connection's process (pid {peer.pid}) cannot be looked at"
        if parent is None or parent <= 1:
            return None
        pid = parent
    return None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # the name in parentheses may hold spaces and parentheses: fields follow the last ")"
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _labelled(pid: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return any(var.startswith(_TASK_MARKS) for var in environ.split(b"\0"))


def new_token(path: Path) -> str:
    """A fresh token for this boot, written owner-only where the CLI reads it."""
    token = secrets.token_urlsafe(32)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, token.encode())
    finally:
        os.close(fd)
    os.replace(staged, path)
    return token


def read_token(path: Path) -> str | None:
    """The running kernel's token, or None when there is none to read."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
