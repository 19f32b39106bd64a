"""`pfar console`: where the running kernel's web console is, and its owner token."""

from __future__ import annotations

import shutil
import webbrowser

import click

from ..kernel.api.arguments import ConsoleTokenArgs
from ..kernel.api.requests import CONSOLE_TOKEN
from . import client
from .output import err, home_of, out


def _has_browser() -> bool:
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


@click.group(invoke_without_command=True)
@click.option("--no-open", is_flag=True, help="Print the address; do not open a browser.")
@click.pass_context
def console(ctx: click.Context, no_open: bool) -> None:
    """The web console of the running kernel: prints its address and opens it where a
    browser exists. Log in with the owner token (`pfar console token`)."""
    if ctx.invoked_subcommand is not None:
        return
    found = client.send(home_of(ctx), CONSOLE_TOKEN, ConsoleTokenArgs())
    if found.url is None:
        err.print(
            "the kernel runs without its console: [console] enabled = false in config.toml, "
            "or its port was taken (the kernel's log says which)"
        )
        raise SystemExit(1)
    out.print(found.url)
    if not no_open and _has_browser():
        webbrowser.open(found.url)
    elif not no_open and shutil.which("xdg-open") is None:
        err.print("(no browser here: open the address on a device that can reach it)", style="dim")


@console.command("token")
@click.option("--rotate", is_flag=True, help="Make a new token: every console session ends.")
@click.pass_context
def token(ctx: click.Context, rotate: bool) -> None:
    """Show the owner token the console's login takes (or make a new one)."""
    found = client.send(home_of(ctx), CONSOLE_TOKEN, ConsoleTokenArgs(rotate=rotate))
    if rotate:
        err.print("a new token: every console session has ended", style="dim")
    click.echo(found.token)
