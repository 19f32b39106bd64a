"""Any task's journal written as a trace.md (seed 003's format): `pfar task trace ID`."""

from __future__ import annotations

import dataclasses
import json

from ...journal import StepStatus, TaskState
from ...journal.store import Store
from ...runners.workflow.trace import Trace, WorkflowStatus, render_trace
from ...runners.workflow.trace_edit import (
    complete_step,
    fail_step,
    new_trace,
    start_step,
    update_step,
)


async def task_as_trace(journal: Store, task_id: str) -> str:
    """The task `task_id` (a whole id) as the text of a trace.md."""
    task = await journal.tasks.get(task_id)
    plan_steps = task.plan_steps
    names = [
        str(s.get("description") or (s.get("args") or {}).get("name") or s.get("tool"))
        for s in plan_steps
    ]
    trace: Trace = new_trace(
        task.template_id, f"pfar task {task.task_id}", names, started=task.created_at
    )
    for rec in await journal.tasks.steps(task_id):
        n = rec.step + 1
        if n > len(names):
            continue
        trace = start_step(trace, n, names[rec.step])
        artifacts = [str(rec.args["path"])] if isinstance(rec.args.get("path"), str) else []
        if rec.status is StepStatus.completed:
            trace = complete_step(
                trace, n, summary=f"{rec.tool}: {_excerpt(rec.result)}", artifacts=artifacts or None
            )
        elif rec.status is StepStatus.skipped:
            trace = complete_step(trace, n, summary=f"{rec.tool}: skipped by the owner")
        elif rec.status is StepStatus.failed:
            trace = fail_step(trace, n, summary=f"{rec.tool} failed", challenges=rec.error or "")
        elif rec.status is StepStatus.cancelled:
            trace = fail_step(
                trace, n, summary=f"{rec.tool} cut off by a cancel", challenges=rec.error or ""
            )
        else:
            trace = update_step(trace, n, current_focus=f"{rec.tool} was running")
    if task.state is TaskState.Completed:
        trace = dataclasses.replace(trace, status=WorkflowStatus.completed)
    return render_trace(trace)


def _excerpt(result: object) -> str:
    if isinstance(result, dict):
        for key in ("summary", "stdout", "body", "content", "stored", "path"):
            if isinstance(result.get(key), str) and result[key].strip():
                return " ".join(str(result[key]).split())[:160]
    return json.dumps(result, sort_keys=True)[:160]
