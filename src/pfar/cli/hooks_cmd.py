"""`pfar hooks`: the hook handlers the running kernel listens with, in firing order."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.requests import HOOKS
from . import client
from .output import emit, home_of, out


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def hooks(ctx: click.Context, as_json: bool) -> None:
    """Hook handlers listening now (config.toml's [[hooks]], hooks/, entry points)."""
    found = client.send(home_of(ctx), HOOKS, NoArgs())
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no hook handler listens (docs/hooks.md says how to add one)")
        return
    table = Table(title_justify="left")
    for column in ("point", "kind", "handler", "tools", "timeout", "on failure"):
        table.add_column(column)
    for h in found:
        table.add_row(
            h.point,
            h.kind,
            h.name,
            ", ".join(h.tools) or "all",
            f"{h.timeout_seconds:g} s",
            "blocks" if h.fails_closed else "logged",
        )
    out.print(table)
