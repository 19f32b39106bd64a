"""A task's timeline: its story told from the journal, in time order. Built here only;
every surface shows this one."""

from __future__ import annotations

import dataclasses

from ...answers import Actor
from ...journal import Semantics, TaskKind
from ...journal.bus_sql import BusEventKind
from ...journal.store import Store
from ...journal.turns import AssistantTurn, DiscardTurn, ResultsTurn, SummaryTurn, Turn, UserTurn
from . import timeline_entries as e
from .answer import task_answer, task_input
from .conversation_records import thinking_of
from .records import StepView, TaskSummary, TaskTimeline

_TOLD = frozenset(
    {
        BusEventKind.TaskPaused,
        BusEventKind.TaskResumed,
        BusEventKind.TaskCancelled,
        BusEventKind.TaskRecovered,
        BusEventKind.TaskRetried,
    }
)


def _actor(text: object) -> Actor | None:
    """Who acted, from the journal's text of them (None: not kept)."""
    return Actor.parse(text) if isinstance(text, str) and text else None


async def task_timeline(journal: Store, task_id: str) -> TaskTimeline:
    """The timeline of the task `task_id` (a whole id: resolve a prefix first)."""
    t = await journal.tasks.get(task_id)
    steps = await journal.tasks.steps(task_id)
    entries: list[e.Entry] = [e.Created(at=t.created_at, template_id=t.template_id)]
    plan_steps = t.plan_steps
    of = None if t.kind is TaskKind.loop else len(plan_steps)  # a loop's calls have no plan
    for s in steps:
        step, tool = s.step, s.tool
        planned = plan_steps[step].get("description", "") if of and step < of else ""
        what = str(planned or "")
        if s.semantics is Semantics.Write and s.started_at:  # a blocked call never started
            entries.append(e.StepStarted(at=s.started_at, step=step, tool=tool, of=of, what=what))
        if s.completed_at:
            entries.append(
                e.StepEnded(
                    at=s.completed_at,
                    step=step,
                    tool=tool,
                    of=of,
                    what=what,
                    status=s.status.value,
                    error=s.error,
                    result=s.result,
                )
            )
    for a in await journal.questions.approvals_for_task(task_id):
        entries.append(
            e.QuestionAsked(at=a.created_at, approval_id=a.approval_id, question=a.action_type)
        )
        if a.decided_at:
            entries.append(
                e.Answered(
                    at=a.decided_at,
                    approval_id=a.approval_id,
                    status=a.status.value,
                    decision=a.decision,
                    by=_actor(a.decided_by),  # who, through which surface (kept from 0013)
                )
            )
    for p in await journal.questions.credential_prompts_for_task(task_id):
        entries.append(e.CredentialAsked(at=p.created_at, prompt_id=p.prompt_id, service=p.service))
        if p.received_at:
            entries.append(
                e.CredentialReceived(
                    at=p.received_at,
                    prompt_id=p.prompt_id,
                    status=p.status.value,
                    by=_actor(p.received_by),
                )
            )
    entries += await _told(journal, task_id)
    for m in await journal.events.for_task(task_id):
        entries.append(
            e.MessageToOwner(at=m["created_at"], message_kind=m["kind"], status=m["status"])
        )
    for c in await journal.tasks.llm_calls(task_id):
        entries.append(
            e.ModelCall(
                at=c["at"],
                provider=c["provider"],
                model=c["model"],
                input_tokens=c["input_tokens"],
                output_tokens=c["output_tokens"],
                cost_usd=c["cost_usd"],
                priced=c.get("priced", True),
            )
        )
    if t.kind is TaskKind.loop:
        for turn in await journal.loops.turns(task_id):
            entries.append(e.LoopTurn(at=turn.at, turn=turn.turn.kind, text=said(turn.turn)))
    entries.append(e.Now(at=t.updated_at, state=t.state.value, error=t.error))
    entries.sort(key=lambda entry: entry.at)  # stable: a moment's entries keep their order
    spent = await journal.tasks.spent_by_task(task_id)
    return TaskTimeline(
        task=dataclasses.replace(
            TaskSummary.of(t),
            cost_usd=spent.cost_usd,
            tokens=spent.tokens,
            unpriced_calls=spent.unpriced,
        ),
        plan=t.plan,
        extracted_metadata=t.extracted_metadata,
        steps=tuple(StepView.of(s) for s in steps),
        entries=tuple(entries),
        input=task_input(t),
        answer=await task_answer(journal, t),
    )


async def _told(journal: Store, task_id: str) -> list[e.Entry]:
    """The owner's pauses, resumes, retries and cancel, and each start's recovery of the task:
    the journal keeps them as the bus's events, each hold with who acted (`by`) since
    that was kept."""
    out: list[e.Entry] = []
    for ev in await journal.events.bus_for_task(task_id, _TOLD):
        by = _actor(ev.body.get("by"))
        if ev.kind is BusEventKind.TaskRecovered:
            action, reason = str(ev.body.get("action", "?")), str(ev.body.get("reason", ""))
            out.append(e.Recovered(at=ev.at, action=action, reason=reason))
        elif ev.kind is BusEventKind.TaskPaused:
            out.append(e.Paused(at=ev.at, paused_from=str(ev.body.get("from", "?")), by=by))
        elif ev.kind is BusEventKind.TaskCancelled:
            out.append(e.Cancelled(at=ev.at, by=by))
        elif ev.kind is BusEventKind.TaskRetried:
            retry, error = ev.body.get("retry"), ev.body.get("error")
            out.append(
                e.Retried(
                    at=ev.at,
                    state=str(ev.body.get("state", "?")),
                    retry=retry if isinstance(retry, int) else 0,
                    error=error if isinstance(error, str) else "",
                    by=by,
                )
            )
        elif ev.body.get("from") == "Paused":
            out.append(e.Resumed(at=ev.at, state=str(ev.body.get("state", "?")), by=by))
    return out


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
            said += thought(turn, limit)
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


def thought(turn: AssistantTurn, limit: int = 2000) -> str:
    """An answer's thinking, told as thinking beside the answer (never as it): the
    text kept (redacted of secrets), or that the provider sent it encrypted."""
    text = thinking_of(turn)
    if not text:
        return ""
    return f" [thinking: {text if len(text) <= limit else text[:limit] + ' …'}]"
