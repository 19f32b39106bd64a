"""`pfar events`: the event bus's task events, in commit order, once or as they come."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import click

from ..errors import KernelNotReady, KernelNotRunning
from ..journal.bus_sql import BusEvent
from ..kernel.api import HomeReader
from ..kernel.api.arguments import AckArgs, EventsArgs
from ..kernel.api.requests import EVENTS, EVENTS_ACK
from . import client
from .output import ask, err, home_of, out

PAGE = 200


@click.command()
@click.option("--after", type=int, default=None, help="Start after this event number.")
@click.option(
    "--as",
    "subscriber",
    default=None,
    help="A subscriber's name: start after its offset, and move the offset past each "
    "event shown, so a restart goes on where it stopped.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing events as they come.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.pass_context
def events(
    ctx: click.Context, after: int | None, subscriber: str | None, follow: bool, as_json: bool
) -> None:
    """Task events (TaskCreated, TaskStarted, UserInputNeeded, TaskBlocked, TaskPaused,
    TaskResumed, TaskCompleted, TaskFailed, TaskCancelled, TaskAbandoned, TaskRecovered,
    TaskRetried),
    numbered in the order their commits happened."""
    home = home_of(ctx)
    shown = 0
    while True:
        args = EventsArgs(after=after, subscriber=subscriber, limit=PAGE)
        page: list[BusEvent]
        if subscriber is None:  # read from the vault when no kernel runs
            page = ask(home, EVENTS, args, functools.partial(_read, after=after))
        else:
            page = _as_subscriber(home, args)
        for event in page:
            # the JSON line is the event as hooks and subscribers read it (body flattened)
            line = event.to_json()
            click.echo(json.dumps(line, sort_keys=True) if as_json else _line(line))
        shown += len(page)
        if page:
            after = page[-1].seq
            if subscriber is not None:
                # shown, then acknowledged: a subscriber killed in between sees the
                # events of that page again (same numbers), never fewer
                client.send(home, EVENTS_ACK, AckArgs(subscriber, after))
        if len(page) == PAGE:
            continue
        if not follow:
            if not page and not shown:
                fresh = after is None and subscriber is None
                said = "no events yet" if fresh else "no new events"
                # with --json, stdout holds JSON lines only (none here): the note is for people
                (err if as_json else out).print(said, style="dim")
            return
        time.sleep(0.3)


async def _read(reader: HomeReader, *, after: int | None) -> list[BusEvent]:
    return await reader.events(after, limit=PAGE)


def _as_subscriber(home: Any, args: EventsArgs) -> list[BusEvent]:
    """A subscriber's page: only a running kernel moves its offset, so `--as` needs one."""
    try:
        page = client.send(home, EVENTS, args)
    except KernelNotReady:
        raise
    except KernelNotRunning:
        err.print(
            f"error: no kernel is running on {home.root}, and `--as {args.subscriber}` moves "
            "that subscriber's offset, which only a running kernel writes; start one with "
            "`pfar run`, or leave out --as to read the events from the vault"
        )
        raise SystemExit(2) from None
    return page


def _line(event: dict[str, Any]) -> str:
    extra = {k: v for k, v in event.items() if k not in ("seq", "kind", "task_id", "at", "state")}
    detail = " ".join(f"{k}={v}" for k, v in sorted(extra.items()))
    task = (event.get("task_id") or "")[:8]
    return (
        f"{event['seq']:>6}  {event['at'][:19].replace('T', ' ')}  {event['kind']:<16} "
        f"{task:8}  {event.get('state', '')} {detail}".rstrip()
    )
