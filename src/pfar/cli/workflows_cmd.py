"""`pfar workflow ...` and the CLI side of traced workflows."""

from __future__ import annotations

import os

import click

from ..errors import PfarError
from ..kernel.api.arguments import DirectoryArgs, WorkflowArgs
from ..kernel.api.session_requests import WORKFLOW_RESUME, WORKFLOW_START
from . import client
from .output import emit, home_of, out, read


@click.group()
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
    arguments = WorkflowArgs(os.path.abspath(definition), os.path.abspath(directory))
    r = client.send(home_of(ctx), WORKFLOW_START, arguments)
    out.print(f"workflow task {r.task_id} started in {os.path.abspath(directory)}")


@workflow.command("resume")
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_context
def workflow_resume(ctx: click.Context, directory: str) -> None:
    """Go on with the workflow in DIRECTORY (recovery check first)."""
    if not os.path.isdir(directory):
        raise PfarError(f"workflow directory {os.path.abspath(directory)} does not exist")
    r = client.send(home_of(ctx), WORKFLOW_RESUME, DirectoryArgs(os.path.abspath(directory)))
    out.print(f"workflow task {r.task_id} {r.state}")


@workflow.command("status")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def workflow_status(ctx: click.Context, directory: str, as_json: bool) -> None:
    """What the trace in DIRECTORY says: state, resume point, artifact check."""
    check = read(home_of(ctx), lambda r: r.workflow_status(directory))
    if as_json:
        emit(check.to_json(), True)
        return
    out.print(f"{check.directory}: {check.state}")
    d = check.decision
    if d is not None and d.resume_step:
        out.print(f"resume point: Step {d.resume_step} ({d.resume_name})")
    for a in d.artifacts if d is not None else ():
        seen = "ok" if a.exists else "MISSING"
        if not a.inside:
            seen = "OUTSIDE the workflow directory (not checked)"
        out.print(f"  artifact {a.path}: {seen}")
    out.print(check.message)
    if d is not None and d.options:
        out.print("options: " + ", ".join(o.value for o in d.options))
