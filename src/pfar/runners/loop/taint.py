"""The loop's taint (`[loop.policy] tainted_writes`): outside data read since the owner's
last message.

A reading tool whose result is labelled Raw (a WebFetch page, an http.request answer:
text anyone can write) may carry instructions to the model. Until the owner speaks
again, a write is asked about even where a standing answer or `always_allow` would let
it run (permissions.Policy.ask). The owner's message ends it: the owner has then seen
what the task did and chosen what it does next. A command's output (Bash, also Raw) does
not taint: commands are writes whose standing answers cover one exact command, and
suspending those after every command would ask about every command.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...journal import StepStatus, TaskRecord
from ...journal.records import Semantics
from ...journal.turns import AssistantTurn, StoredTurn, UserTurn
from ...policy.approvals import TAINTED
from ..services import Services


def since_owner(convo: Sequence[StoredTurn], step: int) -> int:
    """The first call step after the owner's last message (or the task's prompt)."""
    first = step
    for stored in reversed(convo):
        turn = stored.turn
        if isinstance(turn, UserTurn) and turn.source in ("prompt", "owner"):
            break
        if isinstance(turn, AssistantTurn) and turn.calls:
            first = min(first, turn.calls[0].step)
    return first


async def tainted_by(
    task: TaskRecord, convo: Sequence[StoredTurn], step: int, svc: Services
) -> str | None:
    """The outside data this call follows, named for the owner ("WebFetch, tool call 2"),
    or None."""
    first = since_owner(convo, step)
    for record in await svc.journal.tasks.steps(task.task_id):
        if (
            first <= record.step < step
            and record.status is StepStatus.completed
            and record.label == TAINTED
            and record.semantics is Semantics.Read
        ):
            return f"{record.tool}, tool call {record.step + 1}"
    return None
