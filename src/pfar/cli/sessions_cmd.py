"""`pfar session ...` and `pfar secret set`."""

from __future__ import annotations

import json
import os
import sys

import click

from ..journal.sessions import SessionManager, SessionStatus
from ..policy.printable import printable
from ..vault.home import Home
from ..vault.secrets import SecretStore, checked_secret
from ..vault.sqlite import open_vault_db
from . import client
from .output import emit, home_of, out, table


@click.group()
def session() -> None:
    """Long-lived agent sessions (CREATED, ACTIVE, PAUSED, TERMINATED)."""


def _sessionsreadonly(home: Home) -> SessionManager:
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
    manager = _sessionsreadonly(home_of(ctx))
    try:
        rows = [s.to_json() for s in manager.list(SessionStatus(status) if status else None)]
    finally:
        manager.close()
    emit(rows, as_json, table(rows, _SESSION_COLUMNS, f"{len(rows)} session(s)"))


@session.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """One session, with its context."""
    manager = _sessionsreadonly(home_of(ctx))
    try:
        row = manager.get(session_id).to_json()
    finally:
        manager.close()
    if as_json:
        emit(row, True)
        return
    for key, value in row.items():
        text = json.dumps(value) if isinstance(value, dict) else str(value)
        out.print(f"{key:13} {printable(text, indent=' ' * 14)}")


@session.command("new")
@click.argument("project_path", type=click.Path(file_okay=False, exists=True))
@click.argument("thread_id")
@click.pass_context
def session_new(ctx: click.Context, project_path: str, thread_id: str) -> None:
    """Create a session bound to a project directory and a chat thread."""
    # the kernel's working directory is not ours: send the path as we mean it
    project = os.path.abspath(project_path)
    r = client.call(
        home_of(ctx), {"op": "session_new", "project_path": project, "thread_id": thread_id}
    )
    out.print(f"session {r['session_id']} {r['status']}")


def _session_op(ctx: click.Context, op: str, session_id: str) -> None:
    r = client.call(home_of(ctx), {"op": op, "session_id": session_id})
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


@click.group()
def secret() -> None:
    """Secrets in the vault (secrets.db)."""


@secret.command("set")
@click.argument("name")
@click.pass_context
def secret_set(ctx: click.Context, name: str) -> None:
    """Store secret NAME; the value is read from stdin (or a hidden prompt), never argv.

    A template sends it to a tool in its [[credentials]] table as {{secret:NAME}}.
    """
    home = home_of(ctx)
    value = click.prompt("value", hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
    checked = checked_secret(name, value)  # refused here, before it is sent anywhere
    if client.kernel_running(home):
        client.call(home, {"op": "secret_set", "name": name, "value": checked})
    else:
        store = SecretStore.open(home.secrets_db)
        try:
            store.set(name, checked)
        finally:
            store.close()
    out.print(
        f"secret {name} stored; a template sends it with [[credentials]] as {{{{secret:{name}}}}}"
    )
