"""What the trace.md in a workflow directory says: its state, where it would resume,
whether its artifacts are there (`pfar workflow status DIR`). Reads the directory only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ...errors import PfarError
from ...runners.workflow.recovery_check import RecoveryDecision, decide
from ...runners.workflow.trace_edit import read_trace

NO_TRACE = "no_trace"


@dataclass(frozen=True, slots=True)
class WorkflowCheck:
    """The recovery check of the trace in `directory`; `decision` is None when the
    directory has no trace.md yet (`state` is then "no_trace")."""

    directory: str
    state: str
    message: str
    decision: RecoveryDecision | None

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        if d is None:
            return {"directory": self.directory, "state": self.state, "message": self.message}
        return {
            "directory": self.directory,
            "state": self.state,
            "resume_step": d.resume_step,
            "resume_name": d.resume_name,
            "completed_steps": list(d.completed_steps),
            "needs_owner": d.needs_owner,
            "options": [o.value for o in d.options],
            "task_spec": d.context.task_spec,
            "task_spec_exists": d.context.task_spec_exists,
            "artifacts": [
                {"step": a.step, "path": a.path, "exists": a.exists, "inside": a.inside}
                for a in d.artifacts
            ],
            "message": self.message,
        }


def check_workflow(directory: str) -> WorkflowCheck:
    """Run the recovery check on `directory`'s trace.md; changes nothing.

    Raises:
        PfarError: the directory does not exist.
    """
    where = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise PfarError(f"workflow directory {where} does not exist")
    path = os.path.join(directory, "trace.md")
    if not os.path.exists(path):
        return WorkflowCheck(
            where, NO_TRACE, "no trace.md: a workflow started here begins one", None
        )
    d = decide(read_trace(path), directory)
    return WorkflowCheck(where, d.state.value, d.message, d)
