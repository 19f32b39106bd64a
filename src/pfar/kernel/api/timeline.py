"""A task's timeline: its story told from the journal, in time order. Built here only;
every surface shows this one."""

from __future__ import annotations

from ...journal import Semantics, TaskKind
from ...journal.bus_sql import BusEventKind
from ...journal.store import Store
from ...journal.turns import AssistantTurn, DiscardTurn, ResultsTurn, SummaryTurn, Turn, UserTurn
from .answer import task_answer, task_input
from .records import StepView, TaskSummary, TaskTimeline, TimelineEntry

_HELD = frozenset({BusEventKind.TaskPaused, BusEventKind.TaskResumed})


async def task_timeline(journal: Store, task_id: str) -> TaskTimeline:
    """The timeline of the task `task_id` (a whole id: resolve a prefix first)."""
    t = await journal.tasks.get(task_id)
    events: list[tuple[str, str]] = [(t.created_at, f"created from {t.template_id}")]
    steps = await journal.tasks.steps(task_id)
    plan_steps = t.plan_steps
    for s in steps:
        what = plan_steps[s.step].get("description", "") if s.step < len(plan_steps) else ""
        label = (
            f"tool call {s.step + 1} {s.tool}"
            if t.kind is TaskKind.loop
            else f"step {s.step + 1}/{len(plan_steps)} {s.tool}" + (f" ({what})" if what else "")
        )
        if s.semantics is Semantics.Write and s.started_at:  # a blocked call never started
            events.append((s.started_at, f"{label}: started"))
        if s.completed_at:
            end = s.status.value + (f": {s.error}" if s.error else "")
            events.append((s.completed_at, f"{label}: {end}"))
    for a in await journal.questions.approvals_for_task(task_id):
        events.append((a.created_at, f"asked owner [{a.approval_id[:8]}] {a.action_type}"))
        if a.decided_at:
            answer = f"owner answer [{a.approval_id[:8]}]: {a.status.value} ({a.decision})"
            if a.decided_by:  # who, through which surface (not kept before 0013)
                answer += f" via {a.decided_by}"
            events.append((a.decided_at, answer))
    for p in await journal.questions.credential_prompts_for_task(task_id):
        events.append((p.created_at, f"asked owner for {p.service} credential [{p.prompt_id[:8]}]"))
        if p.received_at:
            by = f" via {p.received_by}" if p.received_by else ""
            events.append((p.received_at, f"credential [{p.prompt_id[:8]}] {p.status.value}{by}"))
    # the owner's pauses and resumes: the journal keeps them only as the bus's events
    for e in await journal.events.bus_for_task(task_id, _HELD):
        if e.kind is BusEventKind.TaskPaused:
            events.append((e.at, f"paused (from {e.body.get('from', '?')})"))
        elif e.body.get("from") == "Paused":
            events.append((e.at, f"resumed ({e.body.get('state', '?')})"))
    for m in await journal.events.for_task(task_id):
        events.append((m["created_at"], f"message to owner ({m['kind']}, {m['status']})"))
    if t.kind is TaskKind.loop:
        events += [(turn.at, said(turn.turn)) for turn in await journal.loops.turns(task_id)]
    events.append((t.updated_at, f"now {t.state.value}" + (f": {t.error}" if t.error else "")))
    events.sort(key=lambda e: e[0])
    return TaskTimeline(
        task=TaskSummary.of(t),
        plan=t.plan,
        extracted_metadata=t.extracted_metadata,
        steps=tuple(StepView.of(s) for s in steps),
        entries=tuple(TimelineEntry(at, event) for at, event in events),
        input=task_input(t),
        answer=await task_answer(journal, t),
    )


def said(turn: Turn, limit: int = 2000) -> str:
    """One turn of a loop task's conversation, as the timeline tells it."""

    def cut(text: str) -> str:
        return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more]"

    match turn:
        case UserTurn(source="continue", text=text):
            return f"pfar: {cut(text)}"
        case UserTurn(text=text):
            return f"you: {cut(text)}"
        case AssistantTurn(text=text, calls=calls, rejected=rejected):
            named = ", ".join(f"{c.name} #{c.step + 1}" for c in calls)
            said = f"model: {cut(text) or '(no text)'}" + (f" [calls: {named}]" if named else "")
            if rejected:  # calls that never ran: their errors are not in a results turn
                said += " [could not be used: " + " | ".join(cut(r.error) for r in rejected) + "]"
            return said
        case ResultsTurn(results=results):
            parts = [
                f"#{r.step + 1}{' error' if r.is_error else ''}: {cut(r.content)}" for r in results
            ]
            return "results: " + " | ".join(parts)
        case SummaryTurn(text=text):
            return f"summary of earlier turns: {cut(text)}"
        case DiscardTurn():
            return "you: /retry (the model's answer above is discarded; it is asked again)"
    raise TypeError(f"not a turn: {turn!r}")
