"""A task's calls outside pfar: its tools, and its model provider."""

from __future__ import annotations

from .base import PfarError


class ToolError(PfarError):
    code = "tool"


class ResourceLocked(ToolError):
    """A call's resource lock (seed 001, 4.3) was not to be had within the timeout."""

    code = "resource_locked"

    def __init__(self, what: str, holders: list[str], seconds: float) -> None:
        who = ", ".join(f"task {h.split(':')[0][:8]}" for h in holders) or "another task"
        super().__init__(
            f"Resource locked by another task: {what} is held by {who} "
            f"(waited {seconds:g} s); try again later"
        )
        self.what = what


class UnknownTool(ToolError):
    code = "unknown_tool"

    def __init__(self, name: str) -> None:
        super().__init__(f"no tool named {name!r} is registered")
        self.name = name


class ToolTimeout(ToolError):
    code = "tool_timeout"

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(f"tool {name} did not finish within {seconds:g}s")
        self.name, self.seconds = name, seconds


class ToolFailed(ToolError):
    code = "tool_failed"


class ProviderError(PfarError):
    code = "provider"
