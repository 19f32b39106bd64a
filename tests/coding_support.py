"""Running a coding tool the way the step executor does: `validate`, then `run`, in a
real directory, with a real ToolContext."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pfar.tools.base import Tool, ToolContext
from pfar.tools.hosts import HostPolicy


def context(
    workspace: Path,
    *,
    started: Callable[[int], Awaitable[None]] | None = None,
    summarize: Callable[[str, str], Awaitable[str]] | None = None,
    step: int = 0,
    hosts: HostPolicy | None = None,
) -> ToolContext:
    return ToolContext(
        "task1",
        step,
        f"task1:{step}",
        workspace,
        lambda name: None,
        started,
        summarize=summarize,
        hosts=hosts,
    )


def call(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
    tool.validate(args)
    return asyncio.run(tool.run(args, ctx))


def check(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
    return asyncio.run(tool.check(args, ctx))
