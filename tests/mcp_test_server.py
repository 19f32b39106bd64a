"""An MCP server of the tests' own, built with the official SDK, run as a real process
over stdio: one tool per annotation class, each writing to its own request log (one
JSON line as a call starts, one as it ends) so that a test proves from the server's
side what ran, and how often.

    python mcp_test_server.py LOG_FILE [HOLD_DIR]

(with MCP_TEST_HTTP_PORT set: over streamable HTTP on that loopback port, at /mcp)

A call of tool T waits, after its "start" line, while HOLD_DIR/T exists: a test holds
a call in flight to kill the kernel (or this server) under it. `probe` reports what
the process sees (its environment, whether paths can be read or a socket reached),
for the trust-boundary test. At its start it leaves a child running (`sleep`, logged as
"child"), as a server that starts helpers would: one that outlives its server when
a killed kernel leaves it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

LOG = Path(sys.argv[1])
HOLD = Path(sys.argv[2]) if len(sys.argv) > 2 else None

server = MCPServer("pfar-test")


def _log(event: str, tool: str, args: dict[str, object]) -> None:
    line = {"event": event, "tool": tool, "args": args, "pid": os.getpid()}
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _call(tool: str, args: dict[str, object]) -> None:
    _log("start", tool, args)
    deadline = time.monotonic() + 60
    while HOLD is not None and (HOLD / tool).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek(name: str) -> str:
    """Read a value (read-only)."""
    _call("peek", {"name": name})
    _log("end", "peek", {"name": name})
    return f"peeked {name}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def put(key: str, value: str) -> str:
    """Set key to value (idempotent: the same call twice changes nothing more)."""
    _call("put", {"key": key, "value": value})
    _log("end", "put", {"key": key, "value": value})
    return f"{key} = {value}"


@server.tool()
def append(text: str) -> str:
    """Append text to a list (a plain write: no annotations, so destructive)."""
    _call("append", {"text": text})
    _log("end", "append", {"text": text})
    return f"appended {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def probe(paths: list[str], sockets: list[str]) -> str:
    """What this process sees: its environment, which paths it can read, which unix
    sockets it can connect to."""
    readable = {}
    for p in paths:
        try:
            Path(p).read_bytes() if Path(p).is_file() else os.listdir(p)
            readable[p] = True
        except OSError:
            readable[p] = False
    reachable = {}
    for s in sockets:
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(s)
            reachable[s] = True
        except OSError:
            reachable[s] = False
    seen = {"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd()}
    _log("probe", "probe", {**seen, "readable": readable, "reachable": reachable})
    return json.dumps({"readable": readable, "reachable": reachable})


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def token(ctx: Context) -> str:
    """The Authorization header this call came with (over HTTP), logged."""
    said = (ctx.headers or {}).get("authorization", "")
    _log("token", "token", {"authorization": said})
    return "a token came" if said else "no token came"


if __name__ == "__main__":
    port = os.environ.get("MCP_TEST_HTTP_PORT")
    if port:  # streamable HTTP on loopback, for a server pfar does not start
        server.run("streamable-http", host="127.0.0.1", port=int(port))
        sys.exit()
    helper = subprocess.Popen(
        ["sleep", "300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _log("child", "", {"child": helper.pid})
    # a server's stderr reaches the kernel's log, through its redactor
    print(f"starting with token {os.environ.get('API_TOKEN', '')}", file=sys.stderr, flush=True)
    server.run("stdio")
