"""The kernel's side of MCP servers (tools/mcp/): made with the task services, told to
the owner when one fails, ended when the kernel stops, and those a killed kernel left
ended at the next start, before any task resumes.

Every server process carries `PFAR_MCP=<home tag>:<server>` in its environment, and
whatever it starts inherits it; at start no server of this kernel runs yet, so every
process labelled with this home was left by an earlier boot (a SIGKILL gave it no
chance to end them) and its group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import PfarError
from ..journal.message_keys import McpServerKey, MessageKind
from ..journal.owner_records import OwnerMessage
from ..journal.store import Store
from ..tools import processes
from ..tools.mcp import LABEL
from ..tools.registry import ToolRegistry
from ..tools.sandbox import Sandbox

if TYPE_CHECKING:
    from ..tools.mcp.servers import McpServers

log = logging.getLogger("pfar.kernel")


def build(
    config: Config,
    tools: ToolRegistry,
    *,
    root: Path,
    home_tag: str,
    boot_id: str,
    journal: Store,
    notify: Callable[[], None],
    secret: Callable[[str], str | None],
    redact: Callable[[str], str],
    sandboxer: Callable[[str, Path], Sandbox] | None,
) -> McpServers | None:
    """The configured servers, none started yet; None when there are none."""
    if not any(s.enabled for s in config.mcp.servers):
        return None
    from ..tools.mcp.servers import McpServers  # the SDK, loaded only when it is used

    said = 0

    async def report(text: str) -> None:
        nonlocal said
        said += 1
        try:
            await journal.events.enqueue(
                [OwnerMessage(McpServerKey(boot_id, said), MessageKind.notice, text, None)]
            )
        except PfarError as exc:  # the log has it: a notice never stops a server
            log.error("MCP notice not queued for the owner: %s", exc)
            return
        notify()

    return McpServers(
        config.mcp,
        tools,
        servers_dir=root / "mcp",
        home_tag=home_tag,
        secret=secret,
        redact=redact,
        sandboxer=sandboxer,
        report=report,
    )


async def end_orphans(home_tag: str) -> int:
    """SIGKILL the group of every process labelled as a server of this home; how many
    groups. Called at start, when none of this kernel's can be running."""
    found = await asyncio.to_thread(lambda: list(processes.labelled(LABEL, f"{home_tag}:")))
    mine = os.getpgid(0)
    killed: set[int] = set()
    for pid, _server in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == mine or group in killed:
                continue  # never the kernel's own group
            os.killpg(group, signal.SIGKILL)
            killed.add(group)
    if killed:
        log.warning("ended %d MCP server process group(s) an earlier kernel left", len(killed))
    return len(killed)
