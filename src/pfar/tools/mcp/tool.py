"""A server's tool as a pfar tool: the step executor runs it as any other (its intent
journaled before a write, its result journaled after; permission prompts, hooks, locks),
and what it is after a crash comes from its annotations (semantics.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from mcp import types

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args
from ..coding.text import cap_head_tail
from .semantics import ToolRules
from .server import Listed, McpServer

# a tool's description as the model is shown it, at most (a server may send a book)
_DESCRIPTION = 2000


class McpTool:
    """One listed tool of one server, under its pfar name (`mcp__<server>__<tool>`):
    made by `make_tool`, a class of its own per tool, as a tool's name, description and
    schema are its class's."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    args_schema: ClassVar[dict[str, Any]] = {}
    # an MCP server is outside data to the loop's taint rule (what it returns may hold
    # anything a web page could)
    result_label: ClassVar[str] = "Raw"

    def __init__(self, server: McpServer, listed: Listed, rules: ToolRules) -> None:
        self.server = server
        self.listed = listed
        self.rules = rules
        # what the loop's layer 2 does for it (tools/mcp/semantics.py: `asks`)
        self.asks = rules.asks

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return self.rules.semantics

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return self.rules.idempotency

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    def resources(self, args: dict[str, Any], workspace: Path) -> tuple[Resource, ...]:
        """Its server, as a file is to the file tools: what a call touches there is the
        server's own (a repository, a ticket), so a read shares it and any other call
        holds it alone, across every task the kernel runs."""
        if self.rules.semantics is Semantics.Read:
            return (Resource("mcp", self.server.name, "shared"),)
        return (Resource("mcp", self.server.name, "exclusive"),)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        result = await self.server.call(self.listed.name, args)
        # capped as the coding tools' results are (seed 001: "Truncate if > 30k chars")
        text, _ = cap_head_tail(content_text(result))
        if result.is_error:
            raise ToolFailed(f"{self.name}: {text or 'the tool reported an error'}")
        return text

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None  # a server offers no way to see whether a call's effect exists


def content_text(result: types.CallToolResult) -> str:
    """What a call returned, as text for the model: its text blocks; other blocks named
    (an image by its type); the structured content when there is no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, types.EmbeddedResource):
            inner = block.resource
            if isinstance(inner, types.TextResourceContents):
                parts.append(inner.text)
            else:
                parts.append(f"[resource {inner.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def make_tool(name: str, server: McpServer, listed: Listed, rules: ToolRules) -> McpTool:
    description = f"(MCP server {server.name}) {listed.description}"[:_DESCRIPTION]
    kind = type(
        f"McpTool[{name}]",
        (McpTool,),
        {"name": name, "description": description, "args_schema": listed.input_schema},
    )
    tool: McpTool = kind(server, listed, rules)
    return tool
