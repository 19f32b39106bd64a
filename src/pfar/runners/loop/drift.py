"""Seed 001's drift detector, from the journal: a task past a limit (turns since the
owner spoke, tool calls failed in a row, minutes without progress) stops on a question
to the owner, continue or fail. Also the LoopIteration hook, the same numbers for a
drift watcher of the owner's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...hooks import HookPoint
from ...journal import TaskRecord
from ...journal.bus_sql import BusEventKind
from ...journal.question_kinds import QuestionKind
from ...journal.records import parse_rfc3339
from ...journal.turns import AssistantTurn, LoopSettings, ResultsTurn, StoredTurn, UserTurn
from ..asking import ask_owner
from ..services import Services

_RETRIED = frozenset({BusEventKind.TaskRetried})


async def drifted(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> bool:
    """Seed 001's drift detector, from the journal: past a limit, the task stops on a
    question to the owner (continue, or fail), stating which limit and by how much."""
    since = _owner_spoke_at(convo)
    # the owner's retry of a task that failed (its drift question answered "fail", say)
    # counts as their word: the limits start again from it
    for retried in await svc.journal.events.bus_for_task(task.task_id, _RETRIED):
        since = max(since, retried.at)
    answered = since  # time waiting on the owner is no time without progress
    for a in await svc.journal.questions.approvals_for_task(task.task_id):
        decided = a.decided_at or ""
        if a.action_type is QuestionKind.drift and a.decision == "continue" and decided > since:
            since = decided
        answered = max(answered, decided)
    recent = [t for t in convo if t.at > since or (t.at == since and _is_owner(t))]
    iterations = sum(1 for t in recent if isinstance(t.turn, AssistantTurn))
    limits = svc.loop
    why = None
    if iterations >= limits.max_iterations:
        why = (
            f"it has taken {iterations} turns since you last spoke (limit {limits.max_iterations})"
        )
    elif (failures := failures_in_a_row(recent)) >= limits.max_tool_failures:
        why = f"its last {failures} tool calls failed (limit {limits.max_tool_failures})"
    else:
        idle = _minutes_without_progress(recent, max(since, answered))
        if idle >= limits.max_minutes_without_progress:
            why = (
                f"it has made no progress for {idle:.0f} minutes "
                f"(limit {limits.max_minutes_without_progress:g})"
            )
    if why is None:
        return False
    title = settings.title or task.task_id[:8]
    await ask_owner(
        task,
        svc,
        action_type=QuestionKind.drift,
        step=task.current_step,
        tool=None,
        options=["continue", "fail"],
        description=f"Task {title} looks stuck: {why}. Let it continue, or fail it?",
    )
    return True


async def observe_iteration(task: TaskRecord, convo: Sequence[StoredTurn], svc: Services) -> None:
    """LoopIteration (seed 001, 3.4 and 4.6): the task's numbers, for drift watchers."""
    if not svc.hooks.wants(HookPoint.LoopIteration):
        return
    answers = [t.turn for t in convo if isinstance(t.turn, AssistantTurn)]
    await svc.hooks.observe(
        HookPoint.LoopIteration,
        {
            "task_id": task.task_id,
            "iteration": len(answers),
            "tokens_used": sum(a.input_tokens + a.output_tokens for a in answers),
            "tools_executed": sum(
                len(t.turn.results) for t in convo if isinstance(t.turn, ResultsTurn)
            ),
        },
    )


def _is_owner(t: StoredTurn) -> bool:
    return isinstance(t.turn, UserTurn) and t.turn.source in ("prompt", "owner")


def _owner_spoke_at(convo: Sequence[StoredTurn]) -> str:
    for t in reversed(convo):
        if _is_owner(t):
            return t.at
    return ""


def failures_in_a_row(turns: Sequence[StoredTurn]) -> int:
    n = 0
    for t in reversed(turns):
        if isinstance(t.turn, ResultsTurn):
            for r in reversed(t.turn.results):
                if not r.is_error:
                    return n
                n += 1
    return n


def _minutes_without_progress(turns: Sequence[StoredTurn], since: str) -> float:
    """Minutes from the last meaningful output (a text answer, or a tool call that
    worked), or from the owner's last word, to the newest turn. Measured between turns,
    not to now: a task that waited (paused, or on a question) made no turn meanwhile."""
    mark = since
    for t in turns:
        turn = t.turn
        if (isinstance(turn, AssistantTurn) and turn.text.strip()) or (
            isinstance(turn, ResultsTurn) and any(not r.is_error for r in turn.results)
        ):
            mark = max(mark, t.at)
    if not mark or not turns:
        return 0.0
    newest = parse_rfc3339(turns[-1].at)
    return max(0.0, (newest - parse_rfc3339(mark)).total_seconds() / 60)
