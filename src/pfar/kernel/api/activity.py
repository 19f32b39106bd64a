"""The operator API's `activity`: cost and activity over the last days, every day of the
window present (a day with nothing is zeros), for charts and tables (the console's
/activity page, `POST /api/activity`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TypeVar

from ...errors import BadRequest
from ...journal import TaskKind
from ...journal.activity_sql import CallUsage, StoredActivity
from ...journal.store import Store

MAX_DAYS = 366
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class ModelCost:
    """One model's calls: how many, their tokens and their cost in US dollars."""

    provider: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class TemplateCost:
    """The calls of tasks made from one template (None: calls whose task is gone)."""

    template_id: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class ActivityDay:
    """One UTC day: tasks created (by kind), steps started, model calls and their cost."""

    day: str  # YYYY-MM-DD
    tasks: int
    tasks_by_kind: dict[str, int]  # every kind of task, 0 when none was created
    steps: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    models: tuple[ModelCost, ...]  # by provider and model
    templates: tuple[TemplateCost, ...]  # by template


@dataclass(frozen=True, slots=True)
class Activity:
    """The days `since` up to `until` (excluded), oldest first, and the window's totals
    by model and by template (the most costly first)."""

    since: str
    until: str
    days: tuple[ActivityDay, ...]
    models: tuple[ModelCost, ...]
    templates: tuple[TemplateCost, ...]

    @property
    def cost_usd(self) -> float:
        return sum(d.cost_usd for d in self.days)


def window(days: int, today: date | None = None) -> tuple[date, date]:
    """The `days` UTC days that end with today: `[since, until)`.

    Raises:
        BadRequest: naming `days` when it is not 1 to 366.
    """
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise BadRequest("days", f"must be 1 to {MAX_DAYS}, not {days!r}")
    until = (today or datetime.now(UTC).date()) + timedelta(days=1)
    return until - timedelta(days=days), until


async def activity(journal: Store, days: int, today: date | None = None) -> Activity:
    """The last `days` days' activity (today's so far included)."""
    since, until = window(days, today)
    return shaped(await journal.tasks.activity(since, until))


def shaped(stored: StoredActivity) -> Activity:
    """Every day of the window, zero-filled, from the rows the store holds."""
    kinds: dict[date, dict[str, int]] = defaultdict(_no_tasks)
    for t in stored.tasks:
        kind = str(t.kind)
        kinds[t.day][kind] = kinds[t.day].get(kind, 0) + t.created
    steps = {s.day: s.started for s in stored.steps}
    models: dict[date, list[ModelCost]] = defaultdict(list)
    for m in stored.models:
        models[m.day].append(ModelCost(m.provider, m.model, *_figures(m.usage)))
    templates: dict[date, list[TemplateCost]] = defaultdict(list)
    for c in stored.templates:
        templates[c.day].append(TemplateCost(c.template_id, *_figures(c.usage)))
    shown: list[ActivityDay] = []
    day = stored.since
    while day < stored.until:
        by_kind = kinds.get(day) or _no_tasks()
        calls = models.get(day, [])
        shown.append(
            ActivityDay(
                day=day.isoformat(),
                tasks=sum(by_kind.values()),
                tasks_by_kind=by_kind,
                steps=steps.get(day, 0),
                calls=sum(c.calls for c in calls),
                input_tokens=sum(c.input_tokens for c in calls),
                output_tokens=sum(c.output_tokens for c in calls),
                cost_usd=sum(c.cost_usd for c in calls),
                models=tuple(calls),
                templates=tuple(templates.get(day, [])),
            )
        )
        day += timedelta(days=1)
    return Activity(
        since=stored.since.isoformat(),
        until=stored.until.isoformat(),
        days=tuple(shown),
        models=_models_total(m for d in shown for m in d.models),
        templates=_templates_total(t for d in shown for t in d.templates),
    )


def _no_tasks() -> dict[str, int]:
    return {k.value: 0 for k in TaskKind}


def _figures(u: CallUsage) -> tuple[int, int, int, float]:
    return u.calls, u.input_tokens, u.output_tokens, u.cost_usd


def _summed(rows: Iterable[tuple[K, CallUsage]]) -> dict[K, CallUsage]:
    """The usage of each key, summed over the days (in the order the keys come)."""
    total: dict[K, CallUsage] = {}
    for key, u in rows:
        t = total.get(key)
        total[key] = u if t is None else t.plus(u)
    return total


def _usage(c: ModelCost | TemplateCost) -> CallUsage:
    return CallUsage(c.calls, c.input_tokens, c.output_tokens, c.cost_usd)


def _models_total(rows: Iterable[ModelCost]) -> tuple[ModelCost, ...]:
    total = _summed(((r.provider, r.model), _usage(r)) for r in rows)
    found = [ModelCost(p, m, *_figures(u)) for (p, m), u in total.items()]
    return tuple(sorted(found, key=lambda c: (-c.cost_usd, -c.calls, c.provider, c.model)))


def _templates_total(rows: Iterable[TemplateCost]) -> tuple[TemplateCost, ...]:
    total = _summed((r.template_id, _usage(r)) for r in rows)
    found = [TemplateCost(t, *_figures(u)) for t, u in total.items()]
    return tuple(sorted(found, key=lambda c: (-c.cost_usd, -c.calls, c.template_id or "")))
