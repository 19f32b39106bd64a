"""The name a server's tool has in pfar: `mcp__<server>__<tool>`, never a built-in's.

The providers' APIs take tool names of letters, digits, `_` and `-`, at most 64 long;
a tool's own name outside that (a dot, a space, a long name) is cleaned and cut, with
a short hash of the original so that two tools cleaned alike stay apart.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    head = f"{PREFIX}{server}__"
    clean = _BAD.sub("_", tool)
    if clean == tool and tool and len(head) + len(tool) <= MAX_NAME:
        return head + tool
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    room = MAX_NAME - len(head) - len(digest) - 1
    return f"{head}{clean[:room]}_{digest}"


def is_mcp(name: str) -> bool:
    return name.startswith(PREFIX)
