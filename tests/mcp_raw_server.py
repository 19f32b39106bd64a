"""A broken MCP server, without any SDK: it answers the protocol's JSON-RPC by hand and
lists two tools, one whose input schema no model can be given (an array schema, not an
object one), as a server with a bug would. (The SDK's own server refuses to send such
a listing, so a broken server is written without it.)"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "fine", "description": "Works.", "inputSchema": {"type": "object"}},
    {"name": "crooked", "description": "Listed badly.", "inputSchema": {"type": "array"}},
]


def answer(request: dict[str, object]) -> dict[str, object] | None:
    method = request.get("method")
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        params = request.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        result: dict[str, object] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "fine"}]}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "?"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


for line in sys.stdin:
    if line.strip():
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
