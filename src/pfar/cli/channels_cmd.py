"""`pfar channels`: each chat channel's state, last error, position and deliveries."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.requests import CHANNELS
from .output import ask, emit, home_of, out


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def channels(ctx: click.Context, as_json: bool) -> None:
    """The owner's chat channels: connected, retrying or degraded (with the last error),
    each one's position (a Telegram offset, a Slack cursor) and its messages by status."""
    found = ask(home_of(ctx), CHANNELS, NoArgs(), lambda r: r.channels())
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no chat channels are enabled (see docs/channels.md)")
        return
    table = Table(title_justify="left")
    for column in ("channel", "state", "since", "position", "messages", "last error"):
        table.add_column(column)
    for c in found:
        deliveries = ", ".join(f"{n} {status}" for status, n in sorted(c.deliveries.items()))
        if c.send_error:  # the outbox, as it is: why the next message waits
            when = (c.next_try or "")[:19].replace("T", " ")
            deliveries += f"; next try {when} UTC (last send: {c.send_error})"
        table.add_row(
            c.name,
            c.state + (f" ({c.failures} failed starts)" if c.failures else ""),
            (c.since or "")[:19].replace("T", " "),
            ", ".join(f"{k}={v}" for k, v in (c.position or {}).items()),
            deliveries,
            c.last_error or "",
        )
    out.print(table)
