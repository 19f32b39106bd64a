"""A traced workflow as a kernel task: its journal row, built from its definition."""

from __future__ import annotations

import uuid
from pathlib import Path

from ..journal import InboundEvent, TaskKind, TaskRecord
from ..journal.payloads import Executing
from ..runners.workflow.definition import WorkflowDefinition
from ..runners.workflow.runner import WORKFLOW_PREFIX, definition_hash, workflow_plan


def workflow_task(
    definition: WorkflowDefinition, definition_file: Path, workdir: Path
) -> TaskRecord:
    """A new task that runs `definition` in `workdir`; it starts in Executing, with the
    workflow's steps as its (journal-side) plan."""
    template_id = f"{WORKFLOW_PREFIX}{definition.name}"
    event = InboundEvent(
        event_id=str(uuid.uuid4()),
        adapter="cli",
        template_id=template_id,
        text=f"{definition.name} in {workdir}",
        payload={"definition": str(definition_file), "directory": str(workdir)},
    )
    return TaskRecord.new(
        TaskKind.workflow,
        template_id,
        event,
        Executing(),
        data_ceiling="internal",
        output_sinks=["owner"],
        template_hash=definition_hash(definition_file),
        plan=workflow_plan(definition),
        execute_progress={"current_step": 0},
        extracted_metadata={"workflow": definition.name, "directory": str(workdir)},
    )
