"""`pfar mcp list`: the MCP servers, each one's state and its tools (docs/mcp.md)."""

from __future__ import annotations

import re

import click
from rich.table import Table

from ..config.mcp import SERVER_NAME, SERVER_NAME_LENGTH
from ..config.mcp_edit import add_server, remove_server
from ..kernel.api.arguments import NoArgs
from ..kernel.api.mcp_view import MCP
from ..policy.redact import Redactor
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


@mcp.command("add")
@click.argument("name")
@click.argument("command", nargs=-1, required=False)
@click.option("--url", help="A server that listens already (streamable HTTP), not a command.")
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="VAR=VALUE",
    help="A variable of the command's environment; a secret as {{secret:NAME}} (repeatable).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="A header sent to a --url server; a secret as {{secret:NAME}} (repeatable).",
)
@click.option("--cwd", help="The command's working directory (default: its own under the home).")
@click.option("--disabled", is_flag=True, help="Write the entry with enabled = false.")
@click.pass_context
def add(
    ctx: click.Context,
    name: str,
    command: tuple[str, ...],
    url: str | None,
    env: tuple[str, ...],
    headers: tuple[str, ...],
    cwd: str | None,
    disabled: bool,
) -> None:
    """Add MCP server NAME to config.toml: a COMMAND pfar starts (after `--`), or a
    --url. The rest of the file is kept as it is; the new file is checked whole before
    it replaces the old one. It is started at the kernel's next start.

    \b
    Example:
        pfar mcp add time -- mcp-server-time --local-timezone UTC
        pfar mcp add git --env GITHUB_TOKEN={{secret:github_token}} -- mcp-server-git
    """
    if not re.fullmatch(SERVER_NAME, name) or len(name) > SERVER_NAME_LENGTH:
        raise click.BadParameter(
            f"{name!r}: a server's name is letters and digits, joined by single - or _ "
            f"({SERVER_NAME_LENGTH} characters at most): it is part of its tools' names",
            param_hint="NAME",
        )
    for value, option in [*((c, "COMMAND") for c in command), (url, "--url"), (cwd, "--cwd")]:
        if value is not None and _keyed(value):
            raise click.BadParameter(_KEYED, param_hint=option)
    entry: dict[str, object] = {"name": name}
    if command:
        entry["command"] = list(command)
    if url is not None:
        entry["url"] = url
    if cwd is not None:
        entry["cwd"] = cwd
    if env:
        entry["env"] = _pairs(env, "--env")
    if headers:
        entry["headers"] = _pairs(headers, "--header")
    if disabled:
        entry["enabled"] = False
    if not command and url is None:
        raise click.UsageError("give the server's command after `--`, or its --url")
    home = home_of(ctx)
    added = add_server(home.config, entry)
    how = " ".join(added.command) if added.command else str(added.url)  # no key: refused
    out.print(
        f"added MCP server {added.name!r} ({how}) to {home.config}; it starts with the "
        "kernel's next start (`pfar mcp list` shows it)",
        markup=False,
        highlight=False,
    )


@mcp.command("remove")
@click.argument("name")
@click.pass_context
def remove(ctx: click.Context, name: str) -> None:
    """Take MCP server NAME out of config.toml (the rest of the file is kept as it is).
    A running kernel keeps it until its next start."""
    home = home_of(ctx)
    removed = remove_server(home.config, name)
    out.print(
        f"removed MCP server {removed!r} from {home.config}; a running kernel keeps it "
        "until its next start",
        markup=False,
        highlight=False,
    )


def _pairs(given: tuple[str, ...], option: str) -> dict[str, str]:
    """VAR=VALUE pairs; a value shaped like a credential is refused: config.toml is no
    place for one (the vault is, named as {{secret:NAME}})."""
    pairs: dict[str, str] = {}
    for item in given:
        key, eq, value = item.partition("=")
        if not eq or not key:  # the item is not shown: it may be a key pasted whole
            raise click.BadParameter("takes NAME=VALUE, with an `=`", param_hint=option)
        if _keyed(item):
            raise click.BadParameter(_KEYED, param_hint=f"{option} {key[:40]}")
        pairs[key] = value
    return pairs


_KEYED = (
    "looks like a credential: keep it in the vault (`pfar secret set NAME`) and give "
    "{{secret:NAME}} in its place; nothing was written"
)


def _keyed(value: str) -> bool:
    """A token's shape (ghp_..., sk-..., Bearer ...): config.toml is no place for one,
    and a command's argv is seen by every user of the machine."""
    return Redactor().text(value) != value
