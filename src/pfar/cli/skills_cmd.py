"""`pfar skills`: the skills a loop task started in a directory would be given, and the
skill folders it would not be, with why (read from the files: no kernel needed)."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.skills_view import skills_for
from .output import emit, home_of, out


@click.command()
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    help="the task directory (its .pfar/skills is looked at, beside $PFAR_HOME/skills)",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def skills(ctx: click.Context, directory: str, as_json: bool) -> None:
    """Skills a loop task started in DIR would be given (docs/skills.md)."""
    view = skills_for(home_of(ctx), directory)
    if as_json:
        emit(view, True)
        return
    if view.skills:
        table = Table(title_justify="left")
        for column in ("name", "from", "description", "folder"):
            table.add_column(column, overflow="fold")
        for s in view.skills:
            table.add_row(s.name, s.source, s.description, s.path)
        out.print(table)
    else:
        out.print(f"no skill: a task in {view.directory} is given none (docs/skills.md)")
    for skipped in view.skipped:
        out.print(f"skipped: {skipped.path}: {skipped.why}")
