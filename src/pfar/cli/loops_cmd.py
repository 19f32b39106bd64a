"""`pfar loop PROMPT` and `pfar send ID MESSAGE`: agentic loop tasks, through the running
kernel."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import click

from ..errors import KernelNotReady, KernelNotRunning
from ..kernel.api import HomeReader
from ..kernel.api.arguments import LoopArgs, SendArgs, TaskArgs
from ..kernel.api.records import Sent, Submitted
from ..kernel.api.requests import LOOP, SEND, TASK_RETRY
from ..kernel.holds import describe
from ..policy.printable import printable
from ..runners.loop.tasks import TIERS
from ..vault.home import Home
from . import client
from .input_text import FILE_HELP, text_from
from .output import ask, emit, err, home_of, out, read
from .waiting import WAIT_HELP, wait_and_show


@click.command()
@click.argument("prompt", required=False)
@click.option("--file", "prompt_file", type=click.Path(dir_okay=False), help=FILE_HELP)
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The directory the agent works in (its tools are confined to it).",
)
@click.option("--tier", type=click.Choice(TIERS), default="worker", show_default=True)
@click.option(
    "--once", is_flag=True, help="End the task when the model ends its turn (no conversation)."
)
@click.option("--title", default="", help="A short name for the task (default: the prompt).")
@click.option(
    "--worktree",
    is_flag=True,
    help="Work in the task's own git worktree and branch (pfar/ID) of DIR's repository.",
)
@click.option(
    "--priority",
    type=click.IntRange(-100, 100),
    default=0,
    show_default=True,
    help="When tasks wait for a slot ([scheduler] max_concurrent), higher goes first.",
)
@click.option("--event-id", help="Idempotency: the same event id twice starts one task.")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def loop(
    ctx: click.Context,
    prompt: str | None,
    prompt_file: str | None,
    directory: str,
    tier: str,
    once: bool,
    title: str,
    worktree: bool,
    priority: int,
    event_id: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Start an agent on PROMPT: it reads, writes, edits and runs commands in DIR with its
    tools, asking you before anything risky, until it ends its turn and waits for
    `pfar send`. Every turn and tool call survives a crash. PROMPT `-` reads it from
    stdin."""
    home = home_of(ctx)
    prompt = text_from(prompt, prompt_file, "PROMPT")
    args = LoopArgs(prompt, directory, tier, once, title, event_id, "cli", worktree, priority)
    result = client.send(home, LOOP, args)
    if result.redacted:
        err.print(
            f"note: the prompt held {', '.join(result.redacted)}; the task got "
            "[REDACTED:…] in its place"
        )
    _show(ctx, result, wait, as_json)


@click.command()
@click.argument("task_id")
@click.argument("message")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def send(ctx: click.Context, task_id: str, message: str, wait: bool, as_json: bool) -> None:
    """Send MESSAGE to a loop task waiting for you. `/done` ends it with its summary;
    `/pause`, `/resume` and `/cancel` act on it."""
    result = client.send(home_of(ctx), SEND, SendArgs(task_id, message))
    if result.context is not None:  # /context
        _print_context(result, as_json)
        return
    if result.hold is not None:  # /pause, /resume, /cancel
        if as_json:
            emit(result, True)
        else:
            out.print(describe(result.hold))
        return
    _show(ctx, result, wait, as_json)


@click.command()
@click.argument("task_id")
@click.option(
    "--from-start", is_flag=True, help="Show the whole conversation, not only what is new."
)
@click.pass_context
def attach(ctx: click.Context, task_id: str, from_start: bool) -> None:
    """Watch a task live. A loop task: what it said and did since you last looked,
    then its text as the model writes it, each tool call and result, and its state.
    A pipeline or workflow task: its timeline so far, then each step, question and
    message as it happens, and its state. Ctrl-C detaches; the task goes on."""
    request = {"op": "attach", "task_id": task_id, "from_start": from_start}
    home = home_of(ctx)
    shown = _watched(home, request)
    midline = False
    try:
        for item in shown:
            kind, text = item["kind"], printable(str(item["text"]), indent="  ")
            if kind == "text":
                click.echo(text, nl=False)
                midline = not text.endswith("\n")
                continue
            if midline:
                click.echo()
                midline = False
            if kind == "turn":
                out.print(text, markup=False, highlight=False)
            elif kind == "state":
                hint = _HINTS.get(text, "").replace("ID", task_id[:8])
                err.print(f"[{text}]{hint}", markup=False, highlight=False)
            elif kind == "note":
                err.print(f"({text})", markup=False, highlight=False)
            else:
                err.print(f"task ended: {text}", markup=False, highlight=False)
    except KeyboardInterrupt:
        if midline:
            click.echo()
        err.print("detached; the task goes on")
    finally:
        shown.close()


def _watched(home: Home, request: dict[str, Any]) -> Generator[dict[str, Any], None, None]:
    """The kernel's stream; with no kernel running, what the journal holds (the task,
    if it has not ended, goes on when one starts)."""
    live = client.stream(home, request)
    try:
        first = next(live, None)  # the stream connects on its first step
    except KernelNotReady:
        raise
    except KernelNotRunning:
        task_id, from_start = str(request["task_id"]), bool(request["from_start"])
        found = read(home, lambda r: r.replay(task_id, from_start=from_start))
        yield from (shown.to_json() for shown in found)
        return
    try:
        if first is not None:
            yield first
        yield from live
    finally:
        live.close()


_HINTS = {
    "WaitingForUser": " waits for you: pfar send ID MESSAGE (or /done)",
    "AwaitingApproval": " asks you: pfar approvals",
    "Blocked": " waits for its subtask",
    "Paused": " paused: pfar resume ID",
}


@click.command("context")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def context_cmd(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """How full a loop task's context is: tokens of its next request against the
    model's budget, turns shown and summarized, tokens and cost so far (`/context`)."""
    home = home_of(ctx)

    async def offline(r: HomeReader) -> Sent:
        stats = await r.context(task_id)
        task = await r.journal.tasks.get(await r.journal.tasks.resolve_id(task_id))
        return Sent(task.task_id, task.state, "/context", context=stats)

    _print_context(ask(home, SEND, SendArgs(task_id, "/context"), offline), as_json)


@click.command("retry")
@click.argument("task_id")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def retry_cmd(ctx: click.Context, task_id: str, wait: bool, as_json: bool) -> None:
    """Retry a task: a Failed one whose failure is recoverable goes on from the journal
    where it failed (its completed steps are not run again); a loop task waiting for
    you has its model's answer discarded and asked again (`/retry`)."""
    result = client.send(home_of(ctx), TASK_RETRY, TaskArgs(task_id))
    if wait:
        wait_and_show(home_of(ctx), result.task_id, as_json)
    elif as_json:
        emit(result, True)
    else:
        out.print(result.text())


def _print_context(result: Sent, as_json: bool) -> None:
    if as_json:
        emit(result, True)
    elif result.context is not None:
        out.print(result.context.text())


def _show(ctx: click.Context, result: Sent | Submitted, wait: bool, as_json: bool) -> None:
    if wait:
        wait_and_show(home_of(ctx), result.task_id, as_json)
    elif as_json:
        emit(result, True)
    else:
        out.print(f"task {result.task_id} {result.state}")
