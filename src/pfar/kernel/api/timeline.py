"""A task's timeline: its story told from the journal, in time order. Built here only;
every surface shows this one."""

from __future__ import annotations

from ...journal import Semantics
from ...journal.store import Store
from .records import TaskSummary, TaskTimeline, TimelineEntry


async def task_timeline(journal: Store, task_id: str) -> TaskTimeline:
    """The timeline of the task `task_id` (a whole id: resolve a prefix first)."""
    t = await journal.tasks.get(task_id)
    events: list[tuple[str, str]] = [(t.created_at, f"created from {t.template_id}")]
    steps = await journal.tasks.steps(task_id)
    plan_steps = t.plan_steps
    for s in steps:
        what = plan_steps[s.step].get("description", "") if s.step < len(plan_steps) else ""
        label = f"step {s.step + 1}/{len(plan_steps)} {s.tool}" + (f" ({what})" if what else "")
        if s.semantics is Semantics.Write:
            events.append((s.started_at, f"{label}: started"))
        if s.completed_at:
            end = s.status.value + (f": {s.error}" if s.error else "")
            events.append((s.completed_at, f"{label}: {end}"))
    for a in await journal.questions.approvals_for_task(task_id):
        events.append((a.created_at, f"asked owner [{a.approval_id[:8]}] {a.action_type}"))
        if a.decided_at:
            answer = f"owner answer [{a.approval_id[:8]}]: {a.status.value} ({a.decision})"
            events.append((a.decided_at, answer))
    for p in await journal.questions.credential_prompts_for_task(task_id):
        events.append((p.created_at, f"asked owner for {p.service} credential [{p.prompt_id[:8]}]"))
        if p.received_at:
            events.append((p.received_at, f"credential [{p.prompt_id[:8]}] {p.status.value}"))
    for m in await journal.events.for_task(task_id):
        events.append((m["created_at"], f"message to owner ({m['kind']}, {m['status']})"))
    events.append((t.updated_at, f"now {t.state.value}" + (f": {t.error}" if t.error else "")))
    events.sort(key=lambda e: e[0])
    return TaskTimeline(
        task=TaskSummary.of(t),
        plan=t.plan,
        extracted_metadata=t.extracted_metadata,
        steps=tuple(steps),
        entries=tuple(TimelineEntry(at, event) for at, event in events),
    )
