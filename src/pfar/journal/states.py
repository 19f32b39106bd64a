"""Task states (persistence spec §4.2) and the state machine that says which moves are legal."""

from __future__ import annotations

from enum import StrEnum

from ..errors import IllegalTransition


class TaskState(StrEnum):
    """`PersistedTaskState`'s variants; their payload lives in `TaskRecord.detail`."""

    Extracting = "Extracting"
    Planning = "Planning"
    Executing = "Executing"
    Synthesizing = "Synthesizing"
    AwaitingApproval = "AwaitingApproval"
    AwaitingCredential = "AwaitingCredential"
    Completed = "Completed"
    Failed = "Failed"
    Abandoned = "Abandoned"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def parked(self) -> bool:
        """Waiting on the owner: no coroutine, no memory, only a journal row."""
        return self in (TaskState.AwaitingApproval, TaskState.AwaitingCredential)

    @property
    def phase(self) -> str:
        return _PHASE[self]


PersistedTaskState = TaskState

TERMINAL = frozenset({TaskState.Completed, TaskState.Failed, TaskState.Abandoned})
UNFINISHED = frozenset(TaskState) - TERMINAL

_PHASE = {
    TaskState.Extracting: "extract",
    TaskState.Planning: "plan",
    TaskState.Executing: "execute",
    TaskState.AwaitingApproval: "execute",
    TaskState.AwaitingCredential: "execute",
    TaskState.Synthesizing: "synthesize",
    TaskState.Completed: "egress",
    TaskState.Failed: "",
    TaskState.Abandoned: "",
}

_S = TaskState
_ENDINGS = {_S.Failed, _S.Abandoned}

# Self-loops are legal where a state carries progress (Executing's current_step)
# or is re-entered by recovery (Extracting / Planning re-run their phase).
LEGAL: dict[TaskState, frozenset[TaskState]] = {
    # a thinking phase may park on the owner (e.g. a cloud_routing approval) and return
    _S.Extracting: frozenset({_S.Extracting, _S.Planning, _S.AwaitingApproval, *_ENDINGS}),
    _S.Planning: frozenset({_S.Planning, _S.Executing, _S.AwaitingApproval, *_ENDINGS}),
    _S.Executing: frozenset(
        {_S.Executing, _S.AwaitingApproval, _S.AwaitingCredential, _S.Synthesizing, *_ENDINGS}
    ),
    _S.AwaitingApproval: frozenset(
        {_S.Extracting, _S.Planning, _S.Executing, _S.Synthesizing, *_ENDINGS}
    ),
    _S.AwaitingCredential: frozenset({_S.Executing, *_ENDINGS}),
    _S.Synthesizing: frozenset({_S.Synthesizing, _S.Completed, _S.AwaitingApproval, *_ENDINGS}),
    _S.Completed: frozenset(),
    _S.Failed: frozenset(),
    _S.Abandoned: frozenset(),
}


def is_legal(src: TaskState, dst: TaskState) -> bool:
    return dst in LEGAL[src]


def check_transition(task_id: str, src: TaskState, dst: TaskState) -> None:
    """Raise IllegalTransition unless `src -> dst` is a legal move."""
    if not is_legal(src, dst):
        raise IllegalTransition(task_id, src.value, dst.value)
