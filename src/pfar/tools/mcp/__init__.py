"""Tools from MCP servers (docs/mcp.md): the servers in `[[mcp.servers]]`, supervised
(server.py, servers.py), spoken to through the official `mcp` SDK, their tools named
`mcp__<server>__<tool>` (naming.py) with durable semantics from their annotations
(semantics.py)."""

from .launch import LABEL
from .naming import PREFIX, is_mcp, tool_name
from .servers import McpServers, ServerView, ToolView

__all__ = ["LABEL", "PREFIX", "McpServers", "ServerView", "ToolView", "is_mcp", "tool_name"]
