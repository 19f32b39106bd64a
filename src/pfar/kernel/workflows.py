"""A traced workflow as a kernel task: its journal row, built from its definition."""

from __future__ import annotations

import uuid
from pathlib import Path

from ..journal import TaskRecord, TaskState
from ..journal.records import now_rfc3339
from ..runners.workflow.definition import WorkflowDefinition
from ..runners.workflow.runner import WORKFLOW_PREFIX, definition_hash, workflow_plan


def workflow_task(
    definition: WorkflowDefinition, definition_file: Path, workdir: Path
) -> TaskRecord:
    """A new task that runs `definition` in `workdir`; it starts in Executing, with the
    workflow's steps as its (journal-side) plan."""
    now = now_rfc3339()
    event_id = str(uuid.uuid4())
    template_id = f"{WORKFLOW_PREFIX}{definition.name}"
    return TaskRecord(
        task_id=str(uuid.uuid4()),
        template_id=template_id,
        principal="owner",
        trigger_event={
            "event_id": event_id,
            "adapter": "cli",
            "template_id": template_id,
            "text": f"{definition.name} in {workdir}",
            "principal": "owner",
            "payload": {"definition": str(definition_file), "directory": str(workdir)},
        },
        state=TaskState.Executing,
        detail={"current_step": 0},
        phase=TaskState.Executing.phase,
        plan=workflow_plan(definition),
        execute_progress={"current_step": 0},
        extracted_metadata={"workflow": definition.name, "directory": str(workdir)},
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id=uuid.uuid4().hex,
        created_at=now,
        updated_at=now,
        error=None,
        event_id=event_id,
        template_hash=definition_hash(definition_file),
        recovery_attempts=0,
    )
