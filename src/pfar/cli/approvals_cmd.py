"""Questions from the command line: `pfar approvals`, `pfar approval show`, the answers
(`approve`, `deny`, `answer`) and `pfar credential`."""

from __future__ import annotations

import json
import sys

import click

from ..answers import in_words
from ..journal import TaskState
from ..kernel.api.arguments import AnswerArgs, CredentialArgs
from ..kernel.api.records import Answered
from ..kernel.api.requests import ANSWER, CREDENTIAL
from ..kernel.api.wire import wire_json
from ..policy.printable import printable
from ..vault.secrets import check_secret_size
from . import client
from .output import emit, home_of, out, read, table


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Include answered and expired ones.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def approvals(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Pending approvals and credential prompts."""
    questions = read(home_of(ctx), lambda r: r.questions(answered=show_all))
    if as_json:
        emit(wire_json(questions), True)
        return
    # a question's kind as its text, whichever it is
    rows = [{**wire_json(a), "action_type": str(a.action_type)} for a in questions.approvals]
    creds = [wire_json(c) for c in questions.credentials]
    out.print(
        table(
            rows,
            [
                "approval_id",
                "task_id",
                "action_type",
                "step",
                "status",
                "options",
                "expires_at",
                "description",
            ],
            f"{len(rows)} approval(s)",
        )
    )
    if creds:
        out.print(
            table(
                creds,
                ["prompt_id", "task_id", "service", "credential_type", "status", "expires_at"],
                f"{len(creds)} credential prompt(s)",
            )
        )


@click.group()
def approval() -> None:
    """One approval."""


@approval.command("show")
@click.argument("approval_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def approval_show(ctx: click.Context, approval_id: str, as_json: bool) -> None:
    """The whole question: what it asks, and every argument of the action it lets run."""
    a = read(home_of(ctx), lambda r: r.approval(approval_id))
    row = {**wire_json(a), "action_type": str(a.action_type)}
    if as_json:
        emit(row, True)
        return
    for key in ("approval_id", "task_id", "action_type", "tool", "step", "status", "options"):
        out.print(f"{key}: {row[key]}")
    out.print(f"expires_at: {a.expires_at}")
    out.print(f"description: {a.description}")
    if a.data_preview is not None:
        out.print(f"action ({len(a.data_preview)} characters, sha256 {a.args_sha256}):")
        click.echo(json.dumps(json.loads(a.data_preview), indent=2, ensure_ascii=True))


def _answer(ctx: click.Context, approval_id: str, decision: str) -> None:
    r = client.send(home_of(ctx), ANSWER, AnswerArgs(approval_id, decision))
    chose = in_words(r.decision)
    if r.changed:
        out.print(f"approval {r.approval_id}: {chose}; task {r.task_id} {_after(r)}")
    else:
        out.print(f"approval {r.approval_id} was already {chose}; nothing changed")


def _after(answered: Answered) -> str:
    """What the answer did to its task, read from the task right after it (a denied step
    may fail the task rather than let it go on)."""
    state, error = answered.task_state, answered.task_error
    if state == TaskState.Failed.value:
        return "failed" + (f": {printable(error, indent='  ')}" if error else "")
    if state in (TaskState.Completed.value, TaskState.Cancelled.value, TaskState.Abandoned.value):
        return f"is {state}"
    return f"goes on ({state})" if state else "goes on"


@click.command()
@click.argument("approval_id")
@click.pass_context
def approve(ctx: click.Context, approval_id: str) -> None:
    """Approve (or, for an interrupted write, retry)."""
    _answer(ctx, approval_id, "approve")


@click.command()
@click.argument("approval_id")
@click.pass_context
def deny(ctx: click.Context, approval_id: str) -> None:
    """Deny (the template says whether the step is skipped or the task fails)."""
    _answer(ctx, approval_id, "deny")


@click.command()
@click.argument("approval_id")
@click.argument("option")
@click.pass_context
def answer(ctx: click.Context, approval_id: str, option: str) -> None:
    """Answer with one of the offered options (retry, skip, fail, continue, resume, ...)."""
    _answer(ctx, approval_id, option)


@click.command()
@click.argument("prompt_id")
@click.pass_context
def credential(ctx: click.Context, prompt_id: str) -> None:
    """Provide a credential; the secret is read from stdin, never from argv."""
    if sys.stdin.isatty():
        secret = click.prompt("secret", hide_input=True)
    else:
        secret = sys.stdin.read()
    check_secret_size(secret.strip())  # refused here, before it is sent anywhere
    r = client.send(home_of(ctx), CREDENTIAL, CredentialArgs(prompt_id, secret))
    out.print(f"credential stored; task {r.task_id} resumes")
