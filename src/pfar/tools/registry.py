"""The tool registry: name -> tool, with the built-ins registered by default."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import UnknownTool
from .admin import PromptCredential
from .base import Tool
from .coding import CODING_TOOLS
from .files import FileRead, FileWrite
from .http import HttpRequest
from .shell import ShellRun
from .skills import Skill


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or []:
            self.register(tool)

    @classmethod
    def builtin(cls) -> ToolRegistry:
        return cls(
            [
                FileRead(),
                FileWrite(),
                HttpRequest(),
                ShellRun(),
                PromptCredential(),
                *(tool() for tool in CODING_TOOLS),
                Skill(),
            ]
        )

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownTool(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())
