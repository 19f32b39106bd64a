"""`pfar learnings`: what tasks learned, for the tasks after them (the knowledge store)."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import LearningArgs, LearningsArgs
from ..kernel.api.requests import LEARNING_FORGET, LEARNINGS
from . import client
from .output import ask, emit, home_of, out


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def learnings(ctx: click.Context, as_json: bool) -> None:
    """What completed tasks learned (newest first); a new loop task is given the five
    most relevant to its prompt."""
    if ctx.invoked_subcommand is None:
        _show(ctx, None, as_json)


@learnings.command("search")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def search(ctx: click.Context, text: str, as_json: bool) -> None:
    """The learnings most relevant to TEXT."""
    _show(ctx, text, as_json)


@learnings.command("forget")
@click.argument("learning_id")
@click.pass_context
def forget(ctx: click.Context, learning_id: str) -> None:
    """Drop a learning (its id or a unique prefix): no later task is given it."""
    gone = client.send(home_of(ctx), LEARNING_FORGET, LearningArgs(learning_id))
    out.print(f"forgot {gone.learning_id[:8]}: {gone.content}")


def _show(ctx: click.Context, text: str | None, as_json: bool) -> None:
    found = ask(home_of(ctx), LEARNINGS, LearningsArgs(search=text), lambda r: r.learnings(text))
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no learnings" + (f" about {text!r}" if text else " yet"))
        return
    table = Table(title_justify="left")
    for column in ("id", "learning", "from task", "tags", "at"):
        table.add_column(column)
    for x in found:
        table.add_row(
            x.learning_id[:8],
            x.content,
            (x.source_task or "")[:8],
            ", ".join(x.tags),
            x.created_at[:19].replace("T", " "),
        )
    out.print(table)
