"""`pfar`: the command line. Tables for people, `--json` for scripts."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from ..answers import Actor, in_words
from ..errors import KernelNotRunning, PfarError
from ..journal import TaskState
from ..kernel.api import MAX_LIMIT
from ..kernel.api.requests import (
    ANSWER,
    CREDENTIAL,
    SUBMIT,
    AnswerArgs,
    CredentialArgs,
    SubmitArgs,
)
from ..kernel.setup_home import init_home
from ..policy.printable import printable
from ..vault.home import Home
from ..vault.secrets import check_secret_size
from . import client, ready
from .audit_cmd import audit
from .channels_cmd import channels
from .events_cmd import events
from .holds_cmd import cancel, pause, resume
from .input_text import FILE_HELP, text_from
from .learnings_cmd import learnings
from .loops_cmd import attach, context_cmd, loop, retry_cmd, send
from .output import emit, err, home_of, out, read, table
from .queue_cmd import queue
from .reload_cmd import reload
from .sessions_cmd import secret, session
from .vault_cmd import vault
from .waiting import WAIT_HELP, wait_and_show
from .workflows_cmd import workflow


# user data is never markup; piped output is not squeezed into 80 columns
@click.group()
@click.option(
    "--home",
    "home_dir",
    envvar="PFAR_HOME",
    type=click.Path(file_okay=False),
    help="The kernel's home (default: $PFAR_HOME or ~/.pfar).",
)
@click.version_option(package_name="pfar")
@click.pass_context
def cli(ctx: click.Context, home_dir: str | None) -> None:
    """pfar: a personal agent kernel that never loses work."""
    ctx.obj = {"home": Home.from_env(home_dir)}


@cli.command()
@click.option(
    "--keychain", "choice", flag_value="keychain", help="Keep the vault's key in the OS keychain."
)
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep the vault's key in this new file (owner-only, outside the home).",
)
@click.option(
    "--passphrase",
    "choice",
    flag_value="passphrase",
    help="Keep no key: stretch it from a passphrase at every start (terminal, or the file "
    "descriptor in PFAR_PASSPHRASE_FD).",
)
@click.option(
    "--no-encrypt", "choice", flag_value="none", help="A plain, unencrypted vault (not advised)."
)
@click.pass_context
def init(ctx: click.Context, choice: str | None, key_file: Path | None) -> None:
    """Create a home: config.toml, an encrypted vault, example templates and a model script.

    The vault's key goes to the OS keychain where there is one, else to a key file
    outside the home (printed); `--key-file`, `--passphrase` or `--no-encrypt` choose."""
    from .vault_cmd import init_choice, say_where_the_key_went

    home = home_of(ctx)
    encryption, passphrase = init_choice(choice, key_file)
    for path in init_home(home, encryption=encryption, key_file=key_file, passphrase=passphrase):
        out.print(f"created {path}")
    say_where_the_key_went(home, asked=choice or ("file" if key_file else None))
    out.print(f"\nhome ready: {home.root}\nnext: pfar --home {home.root} run")


@cli.command()
@click.option("--no-stdin", is_flag=True, help="Do not read commands from stdin.")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False),
    help="Write this file (the kernel's pid) once the kernel takes requests; removed "
    "when it stops. A script waits for it instead of sleeping.",
)
@click.pass_context
def run(ctx: click.Context, no_stdin: bool, ready_file: str | None) -> None:
    """Run the kernel in the foreground (CLI adapter on stdin/stdout)."""
    from ..adapters import run as channels_run
    from ..adapters.cli import StdoutSink, read_commands, stdin_reader
    from ..config import Config
    from ..kernel.api import Operator
    from ..kernel.process import serve
    from ..kernel.terminal import say

    home = home_of(ctx)
    if ready_file is not None:
        ready.clear(Path(ready_file))

    async def main() -> int:
        commands = None if no_stdin else await stdin_reader()

        def started(kernel: Any) -> None:
            for e in kernel.template_errors:
                for problem in e.each:  # one line each, with its key
                    say(f"template not loaded: {problem}")
            say(
                f"pfar kernel running on {home.root} (pid {__import__('os').getpid()}, "
                f"boot {kernel.boot_id[:8]})"
            )
            if ready_file is not None:
                ready.write(Path(ready_file))

        config = Config.load(home.config)
        chats: list[Any] = []

        async def before_start(kernel: Any) -> None:
            # the vault opens during start: a channel reads its secrets when it runs
            def secret(name: str) -> str | None:
                return kernel.secrets.get(name)  # type: ignore[no-any-return]

            chats.extend(channels_run.build(config, secret, str(home.config)))
            await channels_run.listen_early(chats)

        def extra(kernel: Any) -> list[asyncio.Task[None]]:
            tasks = []
            if commands is not None:
                # the terminal `pfar run` reads is the owner's: its answers say so
                at_terminal = Operator(kernel, Actor("stdin", f"uid {os.getuid()}"))
                tasks.append(asyncio.create_task(read_commands(at_terminal, commands)))
            if chats:
                tasks.append(channels_run.start(kernel, config, chats))
            return tasks

        return await serve(
            home,
            sinks=[StdoutSink()],
            on_started=started,
            extra=extra,
            before_start=before_start,
        )

    try:
        code = asyncio.run(main())
    finally:
        if ready_file is not None:
            ready.remove(Path(ready_file))
    sys.exit(code)


@cli.command()
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
    if result.get("redacted"):
        err.print(
            f"note: the text held {', '.join(result['redacted'])}; the task got "
            "[REDACTED:…] in its place (a template's [[credentials]] is how a task uses a secret)"
        )
    if wait:
        wait_and_show(home, result["task_id"], as_json)
        return
    if as_json:
        emit(result, True)
    else:
        out.print(f"task {result['task_id']} {result['state']}")


@cli.command()
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([st.value for st in TaskState], case_sensitive=False),
    help="Only tasks in this state (repeatable; any case).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=50,
    show_default=True,
    help="At most this many tasks.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tasks(ctx: click.Context, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """List tasks, newest first."""
    listed = read(home_of(ctx), lambda r: r.tasks([TaskState(s) for s in states], limit))
    rows = [t.to_json() for t in listed]
    cols = ["task_id", "template_id", "state", "phase", "current_step", "updated_at", "error"]
    for row in rows:
        if row["steps"] is not None:
            row["current_step"] = f"{row['current_step']}/{row['steps']}"
        if row["waiting_for"] and not as_json:  # blocked on another task's lock
            row["state"] = f"{row['state']}, blocked on {row['waiting_for']}"
    emit(rows, as_json, table(rows, cols, f"{len(rows)} task(s)"))


@cli.group()
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
        emit(timeline.to_json(), True)
        return
    t = timeline.task
    out.print(f"{t.task_id}  {t.template_id}  {t.state} (phase {t.phase})")
    # errors and events quote tools and servers: their lines after the first are indented
    if t.error:
        out.print(f"error: {printable(t.error, indent='       ')}")
    if timeline.input is not None:
        out.print(f"input: {printable(timeline.input, indent='       ')}")
    if timeline.answer is not None:
        out.print(f"answer: {printable(timeline.answer, indent='        ')}")
    for entry in timeline.entries:
        out.print(f"  {entry.at}  {printable(entry.event, indent='    ')}")


@task.command("trace")
@click.argument("task_id")
@click.pass_context
def task_trace(ctx: click.Context, task_id: str) -> None:
    """The task's journal written as a trace.md (the traced-workflow format)."""
    trace = read(home_of(ctx), lambda r: r.trace(task_id))
    click.echo(printable(trace, indent=""), nl=False)


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include answered and expired ones.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def approvals(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Pending approvals and credential prompts."""
    questions = read(home_of(ctx), lambda r: r.questions(answered=show_all)).to_json()
    if as_json:
        emit(questions, True)
        return
    rows, creds = questions["approvals"], questions["credentials"]
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


@cli.group()
def approval() -> None:
    """One approval."""


@approval.command("show")
@click.argument("approval_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def approval_show(ctx: click.Context, approval_id: str, as_json: bool) -> None:
    """The whole question: what it asks, and every argument of the action it lets run."""
    a = read(home_of(ctx), lambda r: r.approval(approval_id))
    row = a.to_json()
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
    chose = in_words(r["decision"])
    if r["changed"]:
        out.print(f"approval {r['approval_id']}: {chose}; task {r['task_id']} {_after(r)}")
    else:
        out.print(f"approval {r['approval_id']} was already {chose}; nothing changed")


def _after(answered: dict[str, Any]) -> str:
    """What the answer did to its task, read from the task right after it (a denied step
    may fail the task rather than let it go on)."""
    state, error = answered.get("task_state") or "", answered.get("task_error")
    if state == TaskState.Failed.value:
        return "failed" + (f": {printable(error, indent='  ')}" if error else "")
    if state in (TaskState.Completed.value, TaskState.Cancelled.value, TaskState.Abandoned.value):
        return f"is {state}"
    return f"goes on ({state})" if state else "goes on"


@cli.command()
@click.argument("approval_id")
@click.pass_context
def approve(ctx: click.Context, approval_id: str) -> None:
    """Approve (or, for an interrupted write, retry)."""
    _answer(ctx, approval_id, "approve")


@cli.command()
@click.argument("approval_id")
@click.pass_context
def deny(ctx: click.Context, approval_id: str) -> None:
    """Deny (the template says whether the step is skipped or the task fails)."""
    _answer(ctx, approval_id, "deny")


@cli.command()
@click.argument("approval_id")
@click.argument("option")
@click.pass_context
def answer(ctx: click.Context, approval_id: str, option: str) -> None:
    """Answer with one of the offered options (retry, skip, fail, continue, resume, ...)."""
    _answer(ctx, approval_id, option)


@cli.command()
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
    out.print(f"credential stored; task {r['task_id']} resumes")


@cli.command()
@click.option(
    "--dry-run",
    is_flag=True,
    required=True,
    help="Show what recovery would do without changing anything.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recover(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """What recovery would do with every unfinished task (changes nothing)."""
    preview = read(home_of(ctx), lambda r: r.recovery_preview())
    data = preview.to_json()
    if as_json:
        emit(data, True)
        return
    rows = data["decisions"]
    if preview.kernel_running:
        out.print(
            "a kernel is running on this home: it recovered at its start; "
            "this is what a restart now would do"
        )
    out.print(
        table(
            rows,
            ["task_id", "template_id", "state", "current_step", "action", "reason"],
            f"{len(rows)} unfinished task(s)",
        )
    )


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo's home afterwards.")
def demo(keep: bool) -> None:
    """Crash-recovery showcase: SIGKILL a kernel mid-work, restart it, prove nothing repeats."""
    from .demo import run_demo

    sys.exit(run_demo(keep=keep))


task.add_command(context_cmd)
task.add_command(retry_cmd)
cli.add_command(loop)
cli.add_command(channels)
cli.add_command(events)
cli.add_command(learnings)
cli.add_command(queue)
cli.add_command(attach)
cli.add_command(send)
cli.add_command(cancel)
cli.add_command(vault)
cli.add_command(pause)
cli.add_command(resume)
cli.add_command(workflow)
cli.add_command(session)
cli.add_command(secret)
cli.add_command(reload)
cli.add_command(audit)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KernelNotRunning as exc:
        err.print(f"error: {printable(str(exc), indent='  ')}")
        sys.exit(2)
    except PfarError as exc:
        err.print(f"error: {printable(str(exc), indent='  ')}")
        sys.exit(1)
