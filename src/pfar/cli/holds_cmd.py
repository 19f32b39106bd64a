"""`pfar cancel|pause|resume ID`: the owner's hold on a task, through the running kernel
(it alone may end a task's processes or advance it; without one: exit 2)."""

from __future__ import annotations

import click

from ..kernel.api.arguments import TaskArgs
from ..kernel.api.command import Command
from ..kernel.api.requests import TASK_CANCEL, TASK_PAUSE, TASK_RESUME
from ..kernel.holds import HoldResult, describe
from . import client
from .output import emit, home_of, out


def _hold(
    ctx: click.Context, command: Command[TaskArgs, HoldResult], task_id: str, as_json: bool
) -> None:
    result = client.send(home_of(ctx), command, TaskArgs(task_id))
    if as_json:
        emit(result, True)
    else:
        out.print(describe(result))


@click.command()
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def cancel(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Cancel a task: end the process its running step started, withdraw its questions to
    you; it ends Cancelled (a running step is recorded as cut off)."""
    _hold(ctx, TASK_CANCEL, task_id, as_json)


@click.command()
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def pause(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Pause a task between steps: its running step finishes first. It stays Paused,
    across restarts too, until `pfar resume`."""
    _hold(ctx, TASK_PAUSE, task_id, as_json)


@click.command()
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def resume(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Resume a paused task from the journal, where it was paused."""
    _hold(ctx, TASK_RESUME, task_id, as_json)
