"""Task states (persistence spec §4.2) and the state machine that says which moves are legal."""

from __future__ import annotations

from enum import StrEnum

from ..errors import IllegalTransition


class TaskState(StrEnum):
    """`PersistedTaskState`'s variants; each one's payload is its own record (payloads.py)."""

    Extracting = "Extracting"
    Planning = "Planning"
    Executing = "Executing"
    Synthesizing = "Synthesizing"
    AwaitingApproval = "AwaitingApproval"
    AwaitingCredential = "AwaitingCredential"
    # a loop task whose model ended its turn: it waits for the owner's next message
    # (conversation input: no question, no deadline)
    WaitingForUser = "WaitingForUser"
    # a loop task whose tool call waits on something that is not the owner: the subtask
    # its Task call started (later: a resource lock). It holds no coroutine; what it
    # waits on wakes it
    Blocked = "Blocked"
    # waiting for a slot ([scheduler] max_concurrent) or for rate headroom; it goes back
    # to exactly the working state it was queued in
    Queued = "Queued"
    # stopped by the owner between two steps; its payload holds the one it goes back to
    Paused = "Paused"
    # the owner's cancel is committed: its processes are being ended; only Cancelled follows
    Cancelling = "Cancelling"
    Completed = "Completed"
    Failed = "Failed"
    Abandoned = "Abandoned"
    Cancelled = "Cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def parked(self) -> bool:
        """Waiting on the owner (or on a subtask): no coroutine, no memory, only a
        journal row."""
        return self in (
            TaskState.AwaitingApproval,
            TaskState.AwaitingCredential,
            TaskState.WaitingForUser,
            TaskState.Blocked,
        )

    @property
    def working(self) -> bool:
        """A runner may advance it: the only states a coroutine may hold."""
        return self in WORKING

    @property
    def held(self) -> bool:
        """Stopped by the owner (paused, or being cancelled): no runner may move it."""
        return self in (TaskState.Paused, TaskState.Cancelling)

    @property
    def phase(self) -> str:
        return _PHASE[self]


PersistedTaskState = TaskState

# a state by its text, without the enum's call: every task row read and every move asks
BY_VALUE: dict[str, TaskState] = {s.value: s for s in TaskState}

TERMINAL = frozenset(
    {TaskState.Completed, TaskState.Failed, TaskState.Abandoned, TaskState.Cancelled}
)
UNFINISHED = frozenset(TaskState) - TERMINAL
WORKING = frozenset(
    {TaskState.Extracting, TaskState.Planning, TaskState.Executing, TaskState.Synthesizing}
)

_PHASE = {
    TaskState.Extracting: "extract",
    TaskState.Planning: "plan",
    TaskState.Executing: "execute",
    TaskState.AwaitingApproval: "execute",
    TaskState.AwaitingCredential: "execute",
    TaskState.WaitingForUser: "execute",
    TaskState.Blocked: "execute",
    TaskState.Queued: "",  # keeps the phase it was queued in
    TaskState.Synthesizing: "synthesize",
    TaskState.Completed: "egress",
    # held and cancelled tasks keep the phase they were stopped in (see Journal.transition)
    TaskState.Paused: "",
    TaskState.Cancelling: "",
    TaskState.Failed: "",
    TaskState.Abandoned: "",
    TaskState.Cancelled: "",
}

_S = TaskState
# Every unfinished state but Cancelling may fail, be abandoned or be cancelled; a cancel
# always passes through Cancelling, so that its intent is durable before a process is ended.
_ENDINGS = {_S.Failed, _S.Abandoned, _S.Cancelling}
# A task is paused only at a boundary of its own work: never while parked on the owner
# (it holds nothing then already) and never from a state it could not come back to.
_PAUSE = {_S.Paused}

# Self-loops are legal where a state carries progress (Executing's current_step)
# or is re-entered by recovery (Extracting / Planning re-run their phase).
LEGAL: dict[TaskState, frozenset[TaskState]] = {
    # a thinking phase may park on the owner (e.g. a cloud_routing approval) and return
    _S.Extracting: frozenset(
        {_S.Extracting, _S.Planning, _S.AwaitingApproval, *_ENDINGS, *_PAUSE, _S.Queued}
    ),
    _S.Planning: frozenset(
        {_S.Planning, _S.Executing, _S.AwaitingApproval, *_ENDINGS, *_PAUSE, _S.Queued}
    ),
    _S.Executing: frozenset(
        {
            _S.Executing,
            _S.AwaitingApproval,
            _S.AwaitingCredential,
            _S.WaitingForUser,
            _S.Blocked,
            _S.Synthesizing,
            _S.Queued,
            *_ENDINGS,
            *_PAUSE,
        }
    ),
    _S.AwaitingApproval: frozenset(
        {_S.Extracting, _S.Planning, _S.Executing, _S.Synthesizing, *_ENDINGS}
    ),
    _S.AwaitingCredential: frozenset({_S.Executing, *_ENDINGS}),
    # the owner's message goes back to the loop; "done" ends it through its summary
    _S.WaitingForUser: frozenset({_S.Executing, _S.Synthesizing, *_ENDINGS}),
    # the subtask ended: its answer is the call's result, and the loop goes on
    _S.Blocked: frozenset({_S.Executing, *_ENDINGS}),
    _S.Synthesizing: frozenset(
        {_S.Synthesizing, _S.Completed, _S.AwaitingApproval, _S.Queued, *_ENDINGS, *_PAUSE}
    ),
    # admitted: back only to the state it was queued in (check_transition); or paused
    # (it holds nothing while it waits), or ended
    _S.Queued: frozenset({*WORKING, _S.Paused, *_ENDINGS}),
    # back only to the state it was paused from (check_transition), or cancelled
    _S.Paused: frozenset({*WORKING, _S.Cancelling}),
    _S.Cancelling: frozenset({_S.Cancelled}),
    _S.Completed: frozenset(),
    _S.Failed: frozenset(),
    _S.Abandoned: frozenset(),
    _S.Cancelled: frozenset(),
}


def is_legal(
    src: TaskState,
    dst: TaskState,
    paused_from: TaskState | None = None,
    *,
    retrying: bool = False,
) -> bool:
    """The table's answer; leaving Paused (or Queued) for a working state also needs
    `paused_from` (the state the task was paused or queued in) to be that state.
    `retrying`: the owner's retry of a Failed task, the only move it allows."""
    if retrying:
        # the one way out of an ended state: `pfar task retry` of a recoverable failure,
        # back to the working state it failed in (the table holds no such move, so no
        # runner's move can make it)
        return src is TaskState.Failed and dst.working
    if dst not in LEGAL[src]:
        return False
    if src in (TaskState.Paused, TaskState.Queued) and dst.working:
        return dst is paused_from
    return True


def check_transition(
    task_id: str,
    src: TaskState,
    dst: TaskState,
    paused_from: TaskState | None = None,
    *,
    retrying: bool = False,
) -> None:
    """Raise IllegalTransition unless `src -> dst` is a legal move."""
    if not is_legal(src, dst, paused_from, retrying=retrying):
        raise IllegalTransition(task_id, src.value, dst.value)
