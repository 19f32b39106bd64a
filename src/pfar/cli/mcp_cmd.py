"""`pfar mcp list`: the MCP servers, each one's state and its tools (docs/mcp.md)."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.mcp_view import MCP
from .output import ask, emit, home_of, out

_ASKS = {True: "every call", False: "never", None: "as [loop] says"}


@click.group()
def mcp() -> None:
    """Tools from MCP servers ([[mcp.servers]] in config.toml)."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_servers(ctx: click.Context, as_json: bool) -> None:
    """Each MCP server's state and its tools, with what each is after a crash."""
    found = ask(home_of(ctx), MCP, NoArgs(), lambda r: r.mcp_servers())
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no MCP server is configured (docs/mcp.md says how to add one)")
        return
    for s in found:
        why = f": {s.why}" if s.why else ""
        if s.why and s.state == "running":
            why = f" (it stopped before: {s.why})"
        restarts = f", restarted {s.restarts}x" if s.restarts else ""
        pid = f", pid {s.pid}" if s.pid else ""
        out.print(f"{s.name} ({s.transport}) {s.state}{why}{restarts}{pid}")
        for dropped in s.dropped:
            out.print(f"  left out (bad schema): {dropped}")
        if not s.tools:
            continue
        table = Table(title_justify="left")
        for column in ("tool", "server's name", "semantics", "asks"):
            table.add_column(column)
        for t in s.tools:
            table.add_row(t.name, t.server_name, t.semantics, _ASKS[t.asks])
        out.print(table)
