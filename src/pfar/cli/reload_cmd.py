"""`pfar reload`: the running kernel reads its templates, hooks and live settings again."""

from __future__ import annotations

import sys

import click

from ..kernel.api.arguments import NoArgs
from ..kernel.api.requests import RELOAD
from . import client
from .output import emit, home_of, out


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def reload(ctx: click.Context, as_json: bool) -> None:
    """Make the running kernel read templates (cron ones too), hooks and the settings
    that can change live ([hooks], [sessions], [approvals]) again; it names what
    changed but needs a restart, and what did not load (exit 1). SIGHUP does the same."""
    done = client.send(home_of(ctx), RELOAD, NoArgs())
    if as_json:
        emit(done, True)
    else:
        for line in done.lines():
            out.print(line)
    if done.problems:
        sys.exit(1)
