"""Rows for people and for scripts, with the spec's column names."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..journal import ApprovalRecord, CredentialPromptRecord, Journal, StepRecord, TaskRecord


def task_row(t: TaskRecord) -> dict[str, Any]:
    return {
        "task_id": t.task_id,
        "template_id": t.template_id,
        "state": t.state.value,
        "phase": t.phase,
        "current_step": t.current_step if t.plan else None,
        "steps": len((t.plan or {}).get("steps", [])) if t.plan else None,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "error": t.error,
    }


def step_row(s: StepRecord) -> dict[str, Any]:
    return {
        "step": s.step,
        "tool": s.tool,
        "semantics": s.semantics.value,
        "idempotency": s.idempotency.value,
        "status": s.status.value,
        "started_at": s.started_at,
        "completed_at": s.completed_at,
        "error": s.error,
        "result": s.result,
    }


def approval_row(a: ApprovalRecord) -> dict[str, Any]:
    row = asdict(a)
    row["status"] = a.status.value
    return row


def credential_row(p: CredentialPromptRecord) -> dict[str, Any]:
    row = asdict(p)
    row["status"] = p.status.value
    return row


def timeline(journal: Journal, task_id: str) -> dict[str, Any]:
    """A task's whole story from the journal, in time order."""
    t = journal.task(task_id)
    events: list[tuple[str, str]] = [(t.created_at, f"created from {t.template_id}")]
    steps = journal.steps(task_id)
    plan_steps = (t.plan or {}).get("steps", [])
    for s in steps:
        what = plan_steps[s.step].get("description", "") if s.step < len(plan_steps) else ""
        label = f"step {s.step + 1}/{len(plan_steps)} {s.tool}" + (f" ({what})" if what else "")
        if s.semantics.value == "Write":
            events.append((s.started_at, f"{label}: started"))
        if s.completed_at:
            end = s.status.value + (f": {s.error}" if s.error else "")
            events.append((s.completed_at, f"{label}: {end}"))
    for a in journal.approvals_for_task(task_id):
        events.append((a.created_at, f"asked owner [{a.approval_id[:8]}] {a.action_type}"))
        if a.decided_at:
            events.append(
                (
                    a.decided_at,
                    f"owner answer [{a.approval_id[:8]}]: {a.status.value} ({a.decision})",
                )
            )
    for p in journal.credential_prompts_for_task(task_id):
        events.append((p.created_at, f"asked owner for {p.service} credential [{p.prompt_id[:8]}]"))
        if p.received_at:
            events.append((p.received_at, f"credential [{p.prompt_id[:8]}] {p.status.value}"))
    for m in journal.messages_for_task(task_id):
        events.append((m["created_at"], f"message to owner ({m['kind']}, {m['status']})"))
    events.append((t.updated_at, f"now {t.state.value}" + (f": {t.error}" if t.error else "")))
    events.sort(key=lambda e: e[0])
    return {
        "task": task_row(t),
        "plan": t.plan,
        "extracted_metadata": t.extracted_metadata,
        "steps": [step_row(s) for s in steps],
        "timeline": [{"at": at, "event": ev} for at, ev in events],
    }
