"""How a stdio server is started: its argv (in the sandbox when `[sandbox] enabled`), its
working directory, and an environment of its own.

A server is a program of the owner's choosing but not the owner: it gets the basics
(PATH, HOME, LANG ...), the variables its `env` names (secrets filled in from the vault
here, at start, never on its command line), and pfar's label; nothing else of the
kernel's environment (no PFAR_* setting, no token exported where `pfar run` started).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from ...config.mcp import McpServerConfig
from ...errors import ToolFailed
from ..base import SECRET_REF
from ..sandbox import Sandbox

# what a server gets of the kernel's environment
_PASSED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ")

# `PFAR_MCP=<home tag>:<server>` on every server process (and what it starts): a kernel
# that starts ends every process labelled with its home, the servers a killed kernel left
LABEL = "PFAR_MCP"

Sandboxer = Callable[[str, Path], Sandbox]


def environment(
    server: McpServerConfig, home_tag: str, secret: Callable[[str], str | None]
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASSED or k.startswith("LC_")}
    for key, value in server.env.items():
        env[key] = expand(value, secret, f"mcp.servers {server.name!r} env.{key}")
    env[LABEL] = f"{home_tag}:{server.name}"
    return env


def expand(text: str, secret: Callable[[str], str | None], where: str) -> str:
    """`text` with its `{{secret:NAME}}` references filled in from the vault."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        found = secret(name)
        if found is None:
            raise ToolFailed(
                f"{where} names secret {name!r}, which is not in the vault; "
                "set it with `pfar secret set`"
            )
        return found

    return SECRET_REF.sub(sub, text)


def workdir(server: McpServerConfig, servers_dir: Path) -> Path:
    """Its working directory: the one it names, or its own under the home's mcp/."""
    if server.cwd is not None:
        path = Path(server.cwd).expanduser()
        if not path.is_dir():
            raise ToolFailed(f"mcp.servers {server.name!r} cwd {server.cwd!r} is not a directory")
        return path
    own = servers_dir / server.name
    own.mkdir(mode=0o700, parents=True, exist_ok=True)
    return own


def argv(server: McpServerConfig, cwd: Path, sandboxer: Sandboxer | None) -> list[str]:
    assert server.command is not None
    command = list(server.command)
    if sandboxer is None:
        return command
    return sandboxer(f"mcp-{server.name}", cwd).wrap(command)
