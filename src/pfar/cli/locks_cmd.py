"""`pfar locks`: the resource locks tool calls hold now, and until when."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.requests import LOCKS
from .output import ask, emit, home_of, out


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def locks(ctx: click.Context, as_json: bool) -> None:
    """Resource locks held by tool calls (what waits for one: `pfar queue`)."""
    found = ask(home_of(ctx), LOCKS, NoArgs(), lambda r: r.locks())
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no lock is held")
        return
    table = Table(title_justify="left")
    for column in ("kind", "name", "mode", "task", "holder", "since", "lease until"):
        table.add_column(column)
    for h in found:
        table.add_row(
            h.kind,
            h.name,
            h.mode,
            h.task_id[:8],
            f"{h.host} pid {h.pid}",
            h.acquired_at[:19].replace("T", " "),
            h.lease_until[:19].replace("T", " "),
        )
    out.print(table)
