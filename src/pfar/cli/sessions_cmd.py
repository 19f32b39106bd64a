"""`pfar session ...` and `pfar secret set|list|rm`."""

from __future__ import annotations

import json
import os
import sys
from typing import TypeVar

import click

from ..errors import UnknownSecret
from ..journal.sessions import SessionStatus
from ..kernel.api.arguments import NewSessionArgs, SecretArgs, SecretNameArgs, SessionArgs
from ..kernel.api.command import Command
from ..kernel.api.requests import SECRET_RM, SECRET_SET
from ..kernel.api.session_requests import (
    SESSION_NEW,
    SESSION_PAUSE,
    SESSION_RESUME,
    SESSION_TERMINATE,
)
from ..kernel.api.views import SessionView
from ..kernel.api.wire import wire_json
from ..policy.printable import printable
from ..vault import keys
from ..vault.lock import offline_write_lock
from ..vault.secrets import SecretStore, checked_secret
from . import client
from .output import emit, home_of, out, read, table

A = TypeVar("A")


@click.group()
def session() -> None:
    """Long-lived agent sessions (CREATED, ACTIVE, PAUSED, TERMINATED)."""


_SESSION_COLUMNS = ["session_id", "status", "project_path", "thread_id", "updated_at"]


@session.command("list")
@click.option(
    "--status", type=click.Choice([s.value for s in SessionStatus]), help="Only this status."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session_list(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """Sessions, oldest first."""
    wanted = SessionStatus(status) if status else None
    rows = [wire_json(s) for s in read(home_of(ctx), lambda r: r.sessions(wanted))]
    emit(rows, as_json, table(rows, _SESSION_COLUMNS, f"{len(rows)} session(s)"))


@session.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """One session, with its context."""
    row = wire_json(read(home_of(ctx), lambda r: r.session(session_id)))
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
    _session_op(ctx, SESSION_NEW, NewSessionArgs(project, thread_id))


def _session_op(ctx: click.Context, command: Command[A, SessionView], arguments: A) -> None:
    r = client.send(home_of(ctx), command, arguments)
    out.print(f"session {r.session_id} {r.status}")


@session.command("resume")
@click.argument("session_id")
@click.pass_context
def session_resume(ctx: click.Context, session_id: str) -> None:
    """Start the session's agent (CREATED or PAUSED -> ACTIVE)."""
    _session_op(ctx, SESSION_RESUME, SessionArgs(session_id))


@session.command("pause")
@click.argument("session_id")
@click.pass_context
def session_pause(ctx: click.Context, session_id: str) -> None:
    """Stop the agent, keep the session (ACTIVE -> PAUSED)."""
    _session_op(ctx, SESSION_PAUSE, SessionArgs(session_id))


@session.command("terminate")
@click.argument("session_id")
@click.pass_context
def session_terminate(ctx: click.Context, session_id: str) -> None:
    """End the session for good."""
    _session_op(ctx, SESSION_TERMINATE, SessionArgs(session_id))


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
        client.send(home, SECRET_SET, SecretArgs(name, checked))
    else:
        with offline_write_lock(home):  # no kernel starts, no encrypt rewrites it meanwhile
            store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
            try:
                store.set(name, checked)
            finally:
                store.close()
    out.print(
        f"secret {name} stored; a template sends it with [[credentials]] as {{{{secret:{name}}}}}"
    )


@secret.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def secret_list(ctx: click.Context, as_json: bool) -> None:
    """The secrets in the vault: each one's name, service and when it was set; never a
    value. Read from the vault, with or without a kernel."""
    home = home_of(ctx)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home), readonly=True)
    try:
        rows = [e.to_json() for e in store.listing()]
    finally:
        store.close()
    emit(rows, as_json, table(rows, ["name", "service", "updated_at"], f"{len(rows)} secret(s)"))


@secret.command("rm")
@click.argument("name")
@click.pass_context
def secret_rm(ctx: click.Context, name: str) -> None:
    """Drop secret NAME from the vault; a template step that needs it asks for it again."""
    home = home_of(ctx)
    if client.kernel_running(home):
        client.send(home, SECRET_RM, SecretNameArgs(name))
    else:
        with offline_write_lock(home):
            store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
            try:
                if not store.remove(name):
                    raise UnknownSecret(name)
            finally:
                store.close()
    out.print(f"secret {name} removed")
