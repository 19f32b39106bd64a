"""`pfar`: the command line. Tables for people, `--json` for scripts."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..config import Config
from ..errors import KernelNotRunning, PfarError
from ..journal import Journal, TaskState
from ..journal.sessions import SessionManager, SessionStatus
from ..recovery import plan_recovery
from ..vault.home import Home, HomeLock
from ..vault.secrets import SecretStore
from ..vault.sqlite import open_vault_db
from . import client
from .setup_home import init_home
from .views import approval_row, credential_row, task_row, timeline

# user data is never markup; piped output is not squeezed into 80 columns
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, markup=False, soft_wrap=True)


def _home(ctx: click.Context) -> Home:
    return ctx.obj["home"]  # type: ignore[no-any-return]


def _emit(data: Any, as_json: bool, table: Table | None = None) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
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
    return text


def _table(rows: list[dict[str, Any]], columns: list[str], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(_cell(c, r.get(c)) for c in columns))
    return t


def _readonly(home: Home) -> Journal:
    return Journal.open_readonly(home.sessions_db)


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
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create a home: config.toml, the vault, example templates and a model script."""
    home = _home(ctx)
    for path in init_home(home):
        out.print(f"created {path}")
    out.print(f"\nhome ready: {home.root}\nnext: pfar --home {home.root} run")


@cli.command()
@click.option("--no-stdin", is_flag=True, help="Do not read commands from stdin.")
@click.pass_context
def run(ctx: click.Context, no_stdin: bool) -> None:
    """Run the kernel in the foreground (CLI adapter on stdin/stdout)."""
    from ..adapters.cli import StdoutSink, read_commands, stdin_reader
    from ..kernel.process import serve

    home = _home(ctx)

    async def main() -> int:
        reader = None if no_stdin else await stdin_reader()

        def started(kernel: Any) -> None:
            for e in kernel.template_errors:
                err.print(f"template not loaded: {e}")
            err.print(
                f"pfar kernel running on {home.root} (pid {__import__('os').getpid()}, "
                f"boot {kernel.boot_id[:8]})"
            )

        def extra(kernel: Any) -> list[asyncio.Task[None]]:
            if reader is None:
                return []
            return [asyncio.create_task(read_commands(kernel, reader))]

        return await serve(home, sinks=[StdoutSink()], on_started=started, extra=extra)

    sys.exit(asyncio.run(main()))


@cli.command()
@click.argument("template")
@click.argument("text")
@click.option("--event-id", help="Idempotency: the same event id twice creates one task.")
@click.option("--wait", is_flag=True, help="Wait until no task is running, then show it.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def submit(
    ctx: click.Context, template: str, text: str, event_id: str | None, wait: bool, as_json: bool
) -> None:
    """Submit a task to the running kernel."""
    home = _home(ctx)
    result = client.call(
        home,
        {
            "op": "submit",
            "template": template,
            "text": text,
            "event_id": event_id,
            "adapter": "cli",
        },
    )
    if wait:
        client.call(home, {"op": "wait_idle"}, timeout=3600)
        with _readonly(home) as j:
            result = task_row(j.task(result["task_id"]))
    if as_json:
        _emit(result, True)
    else:
        out.print(f"task {result['task_id']} {result['state']}")


@cli.command()
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([st.value for st in TaskState]),
    help="Only tasks in this state (repeatable).",
)
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tasks(ctx: click.Context, states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """List tasks, newest first."""
    with _readonly(_home(ctx)) as j:
        rows = [task_row(t) for t in j.tasks(list(states) or None, limit)]
    cols = ["task_id", "template_id", "state", "phase", "current_step", "updated_at", "error"]
    for r in rows:
        if r["steps"] is not None:
            r["current_step"] = f"{r['current_step']}/{r['steps']}"
    _emit(rows, as_json, _table(rows, cols, f"{len(rows)} task(s)"))


@cli.group()
def task() -> None:
    """One task."""


@task.command("show")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def task_show(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """The task's timeline from the journal."""
    with _readonly(_home(ctx)) as j:
        data = timeline(j, j.resolve_task_id(task_id))
    if as_json:
        _emit(data, True)
        return
    t = data["task"]
    out.print(f"{t['task_id']}  {t['template_id']}  {t['state']} (phase {t['phase']})")
    if t["error"]:
        out.print(f"error: {t['error']}")
    for ev in data["timeline"]:
        out.print(f"  {ev['at']}  {ev['event']}")


@task.command("trace")
@click.argument("task_id")
@click.pass_context
def task_trace(ctx: click.Context, task_id: str) -> None:
    """The task's journal written as a trace.md (the traced-workflow format)."""
    from .trace_view import task_as_trace

    with _readonly(_home(ctx)) as j:
        click.echo(task_as_trace(j, j.resolve_task_id(task_id)), nl=False)


@cli.group()
def workflow() -> None:
    """Traced workflows: steps run in a directory, with trace.md as the source of truth."""


@workflow.command("start")
@click.argument("definition", type=click.Path(dir_okay=False))
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_context
def workflow_start(ctx: click.Context, definition: str, directory: str) -> None:
    """Run DEFINITION in DIRECTORY (an existing trace.md there is checked first)."""
    if not os.path.isdir(directory):
        raise PfarError(f"workflow directory {os.path.abspath(directory)} does not exist")
    r = client.call(
        _home(ctx),
        {
            "op": "workflow_start",
            "definition": os.path.abspath(definition),
            "directory": os.path.abspath(directory),
        },
    )
    out.print(f"workflow task {r['task_id']} started in {os.path.abspath(directory)}")


@workflow.command("resume")
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_context
def workflow_resume(ctx: click.Context, directory: str) -> None:
    """Go on with the workflow in DIRECTORY (recovery check first)."""
    if not os.path.isdir(directory):
        raise PfarError(f"workflow directory {os.path.abspath(directory)} does not exist")
    r = client.call(_home(ctx), {"op": "workflow_resume", "directory": os.path.abspath(directory)})
    out.print(f"workflow task {r['task_id']} {r['state']}")


@workflow.command("status")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def workflow_status(directory: str, as_json: bool) -> None:
    """What the trace in DIRECTORY says: state, resume point, artifact check."""
    from ..runners.workflow.recovery_check import decide
    from ..runners.workflow.trace_edit import read_trace

    path = os.path.join(directory, "trace.md")
    if not os.path.isdir(directory):
        raise PfarError(f"workflow directory {os.path.abspath(directory)} does not exist")
    if not os.path.exists(path):
        data: dict[str, Any] = {
            "directory": os.path.abspath(directory),
            "state": "no_trace",
            "message": "no trace.md: a workflow started here begins one",
        }
    else:
        rd = decide(read_trace(path), directory)
        data = {
            "directory": os.path.abspath(directory),
            "state": rd.state.value,
            "resume_step": rd.resume_step,
            "resume_name": rd.resume_name,
            "completed_steps": list(rd.completed_steps),
            "needs_owner": rd.needs_owner,
            "options": [o.value for o in rd.options],
            "task_spec": rd.context.task_spec,
            "task_spec_exists": rd.context.task_spec_exists,
            "artifacts": [
                {"step": a.step, "path": a.path, "exists": a.exists} for a in rd.artifacts
            ],
            "message": rd.message,
        }
    if as_json:
        _emit(data, True)
        return
    out.print(f"{data['directory']}: {data['state']}")
    if data.get("resume_step"):
        out.print(f"resume point: Step {data['resume_step']} ({data['resume_name']})")
    for a in data.get("artifacts", []):
        out.print(f"  artifact {a['path']}: {'ok' if a['exists'] else 'MISSING'}")
    out.print(data["message"])
    if data.get("options"):
        out.print("options: " + ", ".join(data["options"]))


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include answered and expired ones.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def approvals(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Pending approvals and credential prompts."""
    statuses = (
        ("pending", "approved", "denied", "expired", "recovered") if show_all else ("pending",)
    )
    with _readonly(_home(ctx)) as j:
        rows = [approval_row(a) for a in j.approvals(statuses)]
        creds = [
            credential_row(p)
            for p in j.credential_prompts(
                ("pending", "received", "expired") if show_all else ("pending",)
            )
        ]
    if as_json:
        _emit({"approvals": rows, "credentials": creds}, True)
        return
    out.print(
        _table(
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
            _table(
                creds,
                ["prompt_id", "task_id", "service", "credential_type", "status", "expires_at"],
                f"{len(creds)} credential prompt(s)",
            )
        )


def _answer(ctx: click.Context, approval_id: str, decision: str) -> None:
    r = client.call(_home(ctx), {"op": "answer", "approval_id": approval_id, "decision": decision})
    if r["changed"]:
        out.print(
            f"approval {r['approval_id']}: {r['status']} ({r['decision']}); "
            f"task {r['task_id']} resumes"
        )
    else:
        out.print(
            f"approval {r['approval_id']} was already {r['status']} ({r['decision']}); "
            "nothing changed"
        )


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
    """Answer with one of the offered options (retry, skip, fail, continue, ...)."""
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
    r = client.call(_home(ctx), {"op": "credential", "prompt_id": prompt_id, "secret": secret})
    out.print(f"credential stored; task {r['task_id']} resumes")


@cli.group()
def session() -> None:
    """Long-lived agent sessions (CREATED, ACTIVE, PAUSED, TERMINATED)."""


def _sessions_readonly(home: Home) -> SessionManager:
    return SessionManager(open_vault_db(home.sessions_db, "sessions", readonly=True))


_SESSION_COLUMNS = ["session_id", "status", "project_path", "thread_id", "updated_at"]


@session.command("list")
@click.option(
    "--status", type=click.Choice([s.value for s in SessionStatus]), help="Only this status."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session_list(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """Sessions, oldest first."""
    manager = _sessions_readonly(_home(ctx))
    try:
        rows = [s.to_json() for s in manager.list(SessionStatus(status) if status else None)]
    finally:
        manager.close()
    _emit(rows, as_json, _table(rows, _SESSION_COLUMNS, f"{len(rows)} session(s)"))


@session.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """One session, with its context."""
    manager = _sessions_readonly(_home(ctx))
    try:
        row = manager.get(session_id).to_json()
    finally:
        manager.close()
    if as_json:
        _emit(row, True)
        return
    for key, value in row.items():
        out.print(f"{key:13} {json.dumps(value) if isinstance(value, dict) else value}")


@session.command("new")
@click.argument("project_path", type=click.Path(file_okay=False, exists=True))
@click.argument("thread_id")
@click.pass_context
def session_new(ctx: click.Context, project_path: str, thread_id: str) -> None:
    """Create a session bound to a project directory and a chat thread."""
    r = client.call(
        _home(ctx), {"op": "session_new", "project_path": project_path, "thread_id": thread_id}
    )
    out.print(f"session {r['session_id']} {r['status']}")


def _session_op(ctx: click.Context, op: str, session_id: str) -> None:
    r = client.call(_home(ctx), {"op": op, "session_id": session_id})
    out.print(f"session {r['session_id']} {r['status']}")


@session.command("resume")
@click.argument("session_id")
@click.pass_context
def session_resume(ctx: click.Context, session_id: str) -> None:
    """Start the session's agent (CREATED or PAUSED -> ACTIVE)."""
    _session_op(ctx, "session_resume", session_id)


@session.command("pause")
@click.argument("session_id")
@click.pass_context
def session_pause(ctx: click.Context, session_id: str) -> None:
    """Stop the agent, keep the session (ACTIVE -> PAUSED)."""
    _session_op(ctx, "session_pause", session_id)


@session.command("terminate")
@click.argument("session_id")
@click.pass_context
def session_terminate(ctx: click.Context, session_id: str) -> None:
    """End the session for good."""
    _session_op(ctx, "session_terminate", session_id)


@cli.group()
def secret() -> None:
    """Secrets in the vault (secrets.db)."""


@secret.command("set")
@click.argument("name")
@click.pass_context
def secret_set(ctx: click.Context, name: str) -> None:
    """Store secret NAME; the value is read from stdin (or a hidden prompt), never argv.

    Tool arguments refer to it as {{secret:NAME}}.
    """
    home = _home(ctx)
    value = click.prompt("value", hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
    if client.kernel_running(home):
        client.call(home, {"op": "secret_set", "name": name, "value": value})
    else:
        if not value.strip():
            raise PfarError("the secret is empty; nothing was stored")
        store = SecretStore.open(home.secrets_db)
        try:
            store.set(name, value.strip())
        finally:
            store.close()
    out.print(f"secret {name} stored; use it as {{{{secret:{name}}}}}")


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
    home = _home(ctx)
    config = Config.load(home.config)
    with _readonly(home) as j:
        last = j.last_boot()
        running = HomeLock(home).is_held_elsewhere()
        crashed = last is not None and not last["clean"] and not running
        plan = plan_recovery(
            j,
            datetime.now(UTC),
            timedelta(seconds=config.recovery.max_task_age_seconds),
            config.recovery.max_recovery_attempts,
            crashed,
        )
        rows = []
        for d in plan.decisions:
            t = plan.tasks[d.task_id]
            rows.append({**task_row(t), "action": d.action.value, "reason": d.reason})
    if as_json:
        _emit({"kernel_running": running, "decisions": rows}, True)
        return
    if running:
        out.print(
            "a kernel is running on this home: it recovered at its start; "
            "this is what a restart now would do"
        )
    out.print(
        _table(
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
        err.print(f"error: {exc}")
        sys.exit(2)
    except PfarError as exc:
        err.print(f"error: {exc}")
        sys.exit(1)
