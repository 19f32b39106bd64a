"""`pfar queue`: the tasks waiting for a slot, the next first, and why they wait."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.requests import QUEUE
from .output import ask, emit, home_of, out


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """Tasks waiting to run ([scheduler] max_concurrent), highest priority first."""
    found = ask(home_of(ctx), QUEUE, NoArgs(), lambda r: r.queue())
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("nothing waits: every task that can run is running")
        return
    table = Table(title_justify="left")
    for column in ("#", "task", "priority", "waiting since", "why"):
        table.add_column(column)
    for w in found:
        kind = "cron" if w.reason.startswith("schedule:") else "lock"
        table.add_row(
            str(w.position) if w.position else kind,
            w.task_id[:8] or "-",
            str(w.priority),
            w.since[:19].replace("T", " "),
            w.reason,
        )
    out.print(table)
