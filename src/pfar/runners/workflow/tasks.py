"""A workflow as a kernel task: its template id, its plan in the journal (one step per
workflow step), and where it runs (its definition file and its directory)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...journal import TaskRecord
from .definition import WorkflowDefinition

WORKFLOW_PREFIX = "workflow:"
STEP_TOOL = "workflow.step"


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    definition_path: Path
    directory: Path

    @classmethod
    def of(cls, task: TaskRecord) -> WorkflowRun:
        payload = (task.trigger_event or {}).get("payload", {})
        return cls(Path(payload["definition"]), Path(payload["directory"]))

    @property
    def trace_path(self) -> Path:
        return self.directory / "trace.md"


def definition_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def workflow_plan(definition: WorkflowDefinition) -> dict[str, Any]:
    """The journal's view of the workflow: one plan step per workflow step."""
    return {
        "steps": [
            {
                "tool": STEP_TOOL,
                "args": {"name": s.name, "run": s.run, "artifacts": s.artifacts},
                "description": s.description or s.name,
            }
            for s in definition.steps
        ]
    }
