"""Tasks from the command line: `pfar submit`, `pfar tasks`, `pfar task show|trace`."""

from __future__ import annotations

import shlex

import click

from ..errors import BadRequest
from ..journal import TaskKind, TaskState
from ..journal.task_pages import TaskFilter
from ..kernel.api import MAX_LIMIT
from ..kernel.api.arguments import SubmitArgs
from ..kernel.api.requests import SUBMIT
from ..kernel.api.wire import wire_json
from ..money import dollars
from ..policy.printable import printable
from . import client
from .input_text import FILE_HELP, text_from
from .output import emit, err, home_of, out, read, table
from .waiting import WAIT_HELP, wait_and_show


@click.command()
@click.argument("template")
@click.argument("text", required=False)
@click.option("--file", "text_file", type=click.Path(dir_okay=False), help=FILE_HELP)
@click.option(
    "--event-id",
    help="Idempotency: the same event (id, template, text) twice creates one task.",
)
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def submit(
    ctx: click.Context,
    template: str,
    text: str | None,
    text_file: str | None,
    event_id: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Submit a task to the running kernel. TEXT `-` reads it from stdin."""
    home = home_of(ctx)
    text = text_from(text, text_file, "TEXT")
    result = client.send(home, SUBMIT, SubmitArgs(template, text, event_id=event_id, adapter="cli"))
    if result.redacted:
        err.print(
            f"note: the text held {', '.join(result.redacted)}; the task got "
            "[REDACTED:…] in its place (a template's [[credentials]] is how a task uses a secret)"
        )
    if wait:
        wait_and_show(home, result.task_id, as_json)
        return
    if as_json:
        emit(result, True)
    else:
        out.print(f"task {result.task_id} {result.state}")


@click.command()
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([st.value for st in TaskState], case_sensitive=False),
    help="Only tasks in this state (repeatable; any case).",
)
@click.option(
    "--kind",
    type=click.Choice([k.value for k in TaskKind], case_sensitive=False),
    help="Only tasks of this kind.",
)
@click.option("--template", help="Only tasks of this template id.")
@click.option(
    "--since", help="Only tasks created at or after this time (RFC 3339, or a date: UTC midnight)."
)
@click.option("--until", help="Only tasks created before this time (RFC 3339, or a date).")
@click.option("--text", help="Only tasks whose text holds this (any case).")
@click.option("--after", "cursor", metavar="CURSOR", help="The page after the one that said so.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=50,
    show_default=True,
    help="At most this many tasks.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tasks(
    ctx: click.Context,
    states: tuple[str, ...],
    kind: str | None,
    template: str | None,
    since: str | None,
    until: str | None,
    text: str | None,
    cursor: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List tasks, newest first (by when each was created), a page at a time.

    \b
    Example:
        pfar tasks --state Failed --since 2030-05-01 --text invoice
    """
    wanted = TaskFilter(
        states=tuple(TaskState(s) for s in states),
        kind=TaskKind(kind.lower()) if kind else None,
        template_id=template,
        created_since=since,
        created_until=until,
        text=text,
    )
    try:
        page = read(home_of(ctx), lambda r: r.task_page(wanted, cursor, limit))
    except BadRequest as exc:
        flag = "--after" if exc.field == "cursor" else f"--{exc.field}"
        raise click.BadParameter(exc.problem, param_hint=flag) from None
    rows = wire_json(list(page.tasks))
    cols = ["task_id", "template_id", "state", "phase", "current_step", "cost", "updated_at"]
    cols.append("error")
    for row in rows:
        row["cost"] = _cost(row["cost_usd"], row["unpriced_calls"])
        if row["steps"] is not None:
            row["current_step"] = f"{row['current_step']}/{row['steps']}"
        if row["waiting_for"] and not as_json:  # blocked on another task's lock
            row["state"] = f"{row['state']}, blocked on {row['waiting_for']}"
    emit(rows, as_json, table(rows, cols, f"{len(rows)} task(s)"))
    if page.next_cursor is not None:  # on stderr: --json's list stays the whole output
        given = [*(("--state", st) for st in states), ("--kind", kind), ("--template", template)]
        given += [("--since", since), ("--until", until), ("--text", text)]
        given += [("--limit", str(limit) if limit != 50 else None)]
        flags = [f"{flag} {shlex.quote(v)}" for flag, v in given if v is not None]
        json_flag = ["--json"] if as_json else []
        again = " ".join(["pfar tasks", *flags, *json_flag, "--after", page.next_cursor])
        err.print(f"more: {again}")


@click.group()
def task() -> None:
    """One task."""


@task.command("show")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def task_show(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """The task's timeline from the journal."""
    timeline = read(home_of(ctx), lambda r: r.timeline(task_id))
    if as_json:
        emit(timeline, True)
        return
    t = timeline.task
    out.print(f"{t.task_id}  {t.template_id}  {t.state} (phase {t.phase})")
    # errors and events quote tools and servers: their lines after the first are indented
    if t.error:
        out.print(f"error: {printable(t.error, indent='       ')}")
    if t.retryable:
        out.print(f"its failure is recoverable: pfar task retry {t.task_id[:8]}")
    if timeline.input is not None:
        out.print(f"input: {printable(timeline.input, indent='       ')}")
    if timeline.answer is not None:
        out.print(f"answer: {printable(timeline.answer, indent='        ')}")
    if t.cost_usd is not None:
        calls = sum(1 for e in timeline.entries if e.kind == "model_call")
        spent = _cost(t.cost_usd, t.unpriced_calls)
        out.print(f"spent: {spent} on {calls} model call(s), {t.tokens:,} tokens")
        if t.unpriced_calls:
            out.print(
                f"  {t.unpriced_calls} of them had no price: their cost is unknown "
                "(price their model with [llm.prices.MODEL]; pfar costs --by model names it)"
            )
    for entry in timeline.entries:
        out.print(f"  {entry.at}  {printable(entry.words, indent='    ')}")


def _cost(usd: float | None, unpriced: int | None) -> str:
    """What a task's calls cost: unknown when none had a price, the priced ones' sum
    and "+ unknown" when some had none (never $0.00 for calls of unknown cost)."""
    if usd is None:
        return ""
    if unpriced and usd == 0:
        return "unknown"
    return _dollars(usd) + (" + unknown" if unpriced else "")


def _dollars(usd: float | None) -> str:
    return "" if usd is None else dollars(usd)


@task.command("trace")
@click.argument("task_id")
@click.pass_context
def task_trace(ctx: click.Context, task_id: str) -> None:
    """The task's journal written as a trace.md (the traced-workflow format)."""
    trace = read(home_of(ctx), lambda r: r.trace(task_id))
    click.echo(printable(trace, indent=""), nl=False)
