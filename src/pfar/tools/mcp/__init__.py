"""Tools from MCP servers (docs/mcp.md): the servers in `[[mcp.servers]]`, supervised
(server.py, servers.py), spoken to through the official `mcp` SDK, their tools named
`mcp__<server>__<tool>` (naming.py) with durable semantics from their annotations
(semantics.py).

The SDK is imported only where a server is started (`servers.McpServers`, which the
kernel loads when config names a server): every `pfar` command imports this package,
and the SDK's import costs more than half a second.
"""

from .launch import LABEL
from .naming import PREFIX, is_mcp, tool_name

__all__ = ["LABEL", "PREFIX", "is_mcp", "tool_name"]
