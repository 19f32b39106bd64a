"""`pfar workflow ...` and the CLI side of traced workflows."""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import PfarError
from . import client
from .output import emit, home_of, out


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
    r = client.call(
        home_of(ctx),
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
    r = client.call(
        home_of(ctx), {"op": "workflow_resume", "directory": os.path.abspath(directory)}
    )
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
                {"step": a.step, "path": a.path, "exists": a.exists, "inside": a.inside}
                for a in rd.artifacts
            ],
            "message": rd.message,
        }
    if as_json:
        emit(data, True)
        return
    out.print(f"{data['directory']}: {data['state']}")
    if data.get("resume_step"):
        out.print(f"resume point: Step {data['resume_step']} ({data['resume_name']})")
    for a in data.get("artifacts", []):
        seen = "ok" if a["exists"] else "MISSING"
        if not a["inside"]:
            seen = "OUTSIDE the workflow directory (not checked)"
        out.print(f"  artifact {a['path']}: {seen}")
    out.print(data["message"])
    if data.get("options"):
        out.print("options: " + ", ".join(data["options"]))
