"""What every `pfar` command shares: the consoles, the home, tables, JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from ..errors import KernelNotReady, KernelNotRunning
from ..kernel.api import HomeReader
from ..kernel.api.command import Command
from ..kernel.api.wire import wire_json
from ..policy.printable import printable
from ..vault.home import Home
from . import client

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")


class _Terminal(Console):
    """Text printed for people never carries a control character to their terminal:
    task errors, results and descriptions come from servers and models."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(
            *(printable(o, indent="") if isinstance(o, str) else o for o in objects), **kwargs
        )


out = _Terminal(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)
err = _Terminal(stderr=True, highlight=False, markup=False, soft_wrap=True)


def home_of(ctx: click.Context) -> Home:
    return ctx.obj["home"]  # type: ignore[no-any-return]


def emit(data: Any, as_json: bool, table: Table | None = None) -> None:
    """`data` (a record, a list of them, or JSON values) as JSON, or the table."""
    if as_json:
        click.echo(json.dumps(jsonable(data), indent=2))
    elif table is not None:
        out.print(table)


_SHORT = {"task_id", "approval_id", "prompt_id"}


def _cell(column: str, value: Any) -> str:
    """For people: ids by their first 8 characters (any unambiguous prefix is accepted),
    times to the second. `--json` has everything in full."""
    if value is None:
        return ""
    text = str(value)
    if column in _SHORT:
        text = text[:8]
    elif column.endswith("_at") and "T" in text:
        text = text[:19].replace("T", " ")
    return printable(text, indent="")


def jsonable(data: Any) -> Any:
    """A record as the JSON values the operator API's wire gives it (wire.py)."""
    return wire_json(data)


def table(rows: list[dict[str, Any]], columns: list[str], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(_cell(c, r.get(c)) for c in columns))
    return t


def read(home: Home, ask: Callable[[HomeReader], Awaitable[T]]) -> T:
    """One answer of the operator API's reads of `home`, with or without a running
    kernel (its vault is opened read-only, and closed again)."""

    async def asking() -> T:
        async with HomeReader(home) as r:
            return await ask(r)

    return asyncio.run(asking())


def ask(
    home: Home,
    command: Command[A, R],
    arguments: A,
    offline: Callable[[HomeReader], Awaitable[R]],
) -> R:
    """A read-only view: the running kernel's answer (it knows what is live), or, when
    no kernel runs on `home`, the same view read from its vault: the same record either
    way. A kernel that holds the home but does not answer yet is not read around."""
    try:
        return client.send(home, command, arguments)
    except KernelNotReady:
        raise
    except KernelNotRunning:
        return read(home, offline)
