"""The spend caps at work: before each model call the gate counts what was spent (the
journal's sums, so a restart never resets a count) and holds a call that would reach a
cap; the runner then parks its task on a question to the owner, and the answer moves
it on.

A "continue" adds the configured cap once more, for the scope it was asked about: the
task's own cap, or this task's share of the day's or the month's (the answer is kept
with its question, in the journal, and summed from there at every call). A "fail"
fails the task, saying which cap stopped it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from ..config.budget import BudgetConfig
from ..errors import UnknownTask
from ..journal import ApprovalRecord, TaskRecord
from ..journal.costs_sql import Spent
from ..journal.payloads import AwaitingApproval
from ..journal.question_kinds import QuestionKind
from ..journal.records import args_digest
from ..journal.store import Store
from ..journal.task_protocol import TaskStore
from .asking import ask_owner, kept_grant, new_question
from .services import Services
from .spend_caps import CapReached, NextCall, Raised, Scope, SpendCapReached, periods, reached


class SpendGate:
    """The proxy's gate (`InferenceProxy.gate`): raises SpendCapReached to hold a call."""

    def __init__(self, journal: Store, budget: Callable[[], BudgetConfig]) -> None:
        # the budget is read at each call: `pfar reload` changes the caps of the next one
        self._journal, self._budget = journal, budget

    async def __call__(self, task_id: str, most_tokens: int, most_usd: Callable[[], float]) -> None:
        """Hold a call that may cost `most_tokens` and `most_usd()` at most (the proxy's
        estimate, priced only when a cap is set)."""
        budget = self._budget()
        if not budget.any:  # no cap: no read before a call
            return
        nxt = NextCall(usd=most_usd(), tokens=most_tokens)
        tasks = self._journal.tasks
        day, month = periods()
        root, tree = task_id, [task_id]
        if budget.per_task_usd is not None or budget.per_task_tokens is not None:
            root, tree = await task_tree(self._journal, task_id)
        checks: list[tuple[Scope, str, Callable[[], Awaitable[Spent]], float | None, int | None]]
        checks = [
            (
                "task",
                root,  # a subtask spends from its root task's cap
                lambda: _spent_by(tasks, tree),
                budget.per_task_usd,
                budget.per_task_tokens,
            ),
            (
                "day",
                day,
                lambda: tasks.spent_between(day, _next_day(day)),
                budget.per_day_usd,
                budget.per_day_tokens,
            ),
            (
                "month",
                month,
                lambda: tasks.spent_between(month, _next_month(month)),
                budget.per_month_usd,
                budget.per_month_tokens,
            ),
        ]
        raised: dict[tuple[Scope, str], Raised] | None = None  # read only at a cap
        for scope, period, spent_now, usd, tokens in checks:
            if usd is None and tokens is None:
                continue
            spent = await spent_now()
            if reached(scope, period, spent, nxt, usd, tokens, Raised()) is None:
                continue  # under the cap as configured: the owner's additions change nothing
            if raised is None:
                raised = await raises(self._journal, task_id, tree)
            got = raised.get((scope, period), Raised())
            cap = reached(scope, period, spent, nxt, usd, tokens, got)
            if cap is not None:
                raise SpendCapReached(task_id, cap)


async def task_tree(journal: Store, task_id: str) -> tuple[str, list[str]]:
    """The root of a task's tree of subtasks (Task calls) and every task in it, the root
    first. A few reads: the tree of a live task is its own work, not the journal's."""
    root, seen = task_id, {task_id}
    while True:
        try:
            parent = (await journal.loops.settings(root)).parent_task_id
        except UnknownTask:  # not a loop task: no parent, no subtasks
            break
        if not parent or parent in seen:
            break
        root = parent
        seen.add(root)
    tree, todo = [root], [root]
    while todo:
        found = [c for c in await journal.loops.children(todo.pop()) if c not in tree]
        tree += found
        todo += found
    return root, tree


async def _spent_by(tasks: TaskStore, tree: list[str]) -> Spent:
    each = (await tasks.spent_by_tasks(tree)).values()
    return Spent(
        sum(s.calls for s in each),
        sum(s.input_tokens for s in each),
        sum(s.output_tokens for s in each),
        sum(s.cost_usd for s in each),
        sum(s.unpriced for s in each),
    )


async def raises(
    journal: Store, task_id: str, tree: list[str] | None = None
) -> dict[tuple[Scope, str], Raised]:
    """What the owner added to each cap for this task: one cap's worth for each
    "continue" to a spend cap question (its scope, period and amount kept with it).
    The tree's other tasks add to the task cap they share (their root's), not to this
    task's share of a day's or a month's."""
    found: dict[tuple[Scope, str], Raised] = {}
    questions = list(await journal.questions.approvals_for_task(task_id))
    for other in tree or ():
        if other != task_id:
            theirs = await journal.questions.approvals_for_task(other)
            questions += [a for a in theirs if (c := asked_cap(a)) and c.scope == "task"]
    for a in questions:
        if a.action_type is not QuestionKind.spend_cap or a.decision != "continue":
            continue
        asked = asked_cap(a)
        if asked is not None:
            key = (asked.scope, asked.period)
            found[key] = found.get(key, Raised()).plus(asked.unit, asked.more)
    return found


async def ask_about_cap(
    task: TaskRecord,
    svc: Services,
    exc: SpendCapReached,
    *,
    title: str,
    resume_to: Literal["Extracting", "Planning", "Synthesizing"] | None = None,
) -> None:
    """Park the task on the cap's question; what "continue" adds is kept with it. A
    day's or a month's question also offers "retry" (the owner raised the cap in
    config.toml: try the call again, adding nothing), which the kernel answers itself
    once the hold lifts (`hold_lifted`), and it waits out its period before it expires."""
    cap = exc.cap
    options, timeout = ["continue", "fail"], None
    if cap.scope != "task":
        options = ["continue", "retry", "fail"]
        left = (_period_end(cap.scope, cap.period) - datetime.now(UTC)).total_seconds()
        timeout = max(0.0, left) + svc.approval_timeout_seconds
        if await _told_already(svc.journal, cap):
            await _park_quietly(task, svc, cap, options, timeout, resume_to, title)
            return
    await ask_owner(
        task,
        svc,
        action_type=QuestionKind.spend_cap,
        step=task.current_step,
        tool=None,
        options=options,
        description=cap.question(title),
        preview=_kept(cap),
        resume_to=resume_to,
        timeout=timeout,
    )


async def hold_lifted(journal: Store, budget: BudgetConfig, question: ApprovalRecord) -> bool:
    """A day's or a month's cap no longer holds the call its question is about: the
    period is over, or the cap (raised or removed by a reload) now lets it go."""
    asked = asked_cap(question)
    if asked is None or asked.scope == "task":
        return False
    day, month = periods()
    if asked.period != (day if asked.scope == "day" else month):
        return True
    usd, tokens = (
        (budget.per_day_usd, budget.per_day_tokens)
        if asked.scope == "day"
        else (budget.per_month_usd, budget.per_month_tokens)
    )
    cap = usd if asked.unit == "usd" else tokens
    if cap is None:
        return True
    until = _next_day(asked.period) if asked.scope == "day" else _next_month(asked.period)
    spent = await journal.tasks.spent_between(asked.period, until)
    raised = (await raises(journal, question.task_id)).get((asked.scope, asked.period), Raised())
    nxt = NextCall(asked.next_call, int(asked.next_call))
    usd, tokens = (cap, None) if asked.unit == "usd" else (None, int(cap))
    return reached(asked.scope, asked.period, spent, nxt, usd, tokens, raised) is None


def _kept(cap: CapReached) -> dict[str, object]:
    """What a cap's question keeps of it: what a "continue" adds, and to which cap."""
    return {
        "scope": cap.scope,
        "period": cap.period,
        "unit": cap.unit,
        "more": cap.more,
        "next": cap.next_call,
    }


async def _told_already(journal: Store, cap: CapReached) -> bool:
    """The owner was asked about this day's (or month's) cap for another task and has
    not answered: that one message says it, and `pfar approvals` lists every task held."""
    for a in await journal.questions.approvals():
        asked = asked_cap(a) if a.action_type is QuestionKind.spend_cap else None
        if asked is not None and (asked.scope, asked.period) == (cap.scope, cap.period):
            return True
    return False


async def _park_quietly(
    task: TaskRecord,
    svc: Services,
    cap: CapReached,
    options: list[str],
    timeout: float,
    resume_to: Literal["Extracting", "Planning", "Synthesizing"] | None,
    title: str,
) -> None:
    """The task's own question about a cap the owner was told of: parked, no message."""
    preview = _kept(cap)
    approval = new_question(
        task.task_id,
        action_type=QuestionKind.spend_cap,
        step=task.current_step,
        tool=None,
        options=options,
        description=cap.question(title),
        timeout=timeout,
        preview=json.dumps(preview, sort_keys=True),
        args_sha256=args_digest(preview),
    )
    parked = AwaitingApproval(
        approval_id=approval.approval_id,
        step=task.current_step,
        resume_to=resume_to,
        approved=kept_grant(task.payload, task.current_step),
    )
    await svc.journal.questions.park_approval(approval, None, parked)


def asked_cap(a: ApprovalRecord) -> CapReached | None:
    """The cap a question was about, from what it kept (None: a row no pfar wrote)."""
    try:
        kept = json.loads(a.data_preview or "")
        scope, unit, more = kept["scope"], kept["unit"], float(kept["more"])
        period, nxt = str(kept["period"]), float(kept.get("next", 0.0))
    except (ValueError, KeyError, TypeError):
        return None
    if scope not in ("task", "day", "month") or unit not in ("usd", "tokens") or more < 0:
        return None
    return CapReached(scope, period, unit, 0.0, 0.0, nxt, more)


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _period_end(scope: Scope, period: str) -> datetime:
    end = _next_day(period) if scope == "day" else _next_month(period) + "-01"
    return datetime.fromisoformat(end).replace(tzinfo=UTC)


def _next_month(month: str) -> str:
    year, mon = int(month[:4]), int(month[5:7])
    return f"{year + mon // 12:04d}-{mon % 12 + 1:02d}"
