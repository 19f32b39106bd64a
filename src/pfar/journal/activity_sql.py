"""Activity by day: tasks created, steps started, model calls with their tokens and cost,
by model and by task template, over a window of days.

Timestamps are RFC 3339 text in UTC (timestamps.py), so a day is a stamp's first 10
characters, and a window of days `[since, until)` is the text range
`since <= at < until`: "2025-03-01" sorts before every stamp of that day
("2025-03-01T00:00:00.000000Z" among them) and after every stamp of the day before.
Each statement reads its table through its time index (schema 14: `llm_calls(at)`,
`task_journal(created_at)`, `task_steps(started_at)`), so what a window costs grows
with the rows in it, not with the journal's history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

from .records import TaskKind
from .tx import Tx

TASKS_BY_DAY: Final = (
    "SELECT substr(created_at, 1, 10), kind, count(*) FROM task_journal "
    "WHERE created_at >= ? AND created_at < ? "
    "GROUP BY substr(created_at, 1, 10), kind ORDER BY 1, 2"
)
STEPS_BY_DAY: Final = (
    "SELECT substr(started_at, 1, 10), count(*) FROM task_steps "
    "WHERE started_at >= ? AND started_at < ? "
    "GROUP BY substr(started_at, 1, 10) ORDER BY 1"
)
_SUMS = (
    "count(*), coalesce(sum(c.input_tokens), 0), coalesce(sum(c.output_tokens), 0), "
    "coalesce(sum(c.cost_usd), 0)"
)
MODELS_BY_DAY: Final = (
    f"SELECT substr(c.at, 1, 10), c.provider, c.model, {_SUMS} FROM llm_calls c "
    "WHERE c.at >= ? AND c.at < ? "
    "GROUP BY substr(c.at, 1, 10), c.provider, c.model ORDER BY 1, 2, 3"
)
# a call whose task is gone (pruned, or never journaled) has no template: NULL
TEMPLATES_BY_DAY: Final = (
    f"SELECT substr(c.at, 1, 10), t.template_id, {_SUMS} FROM llm_calls c "
    "LEFT JOIN task_journal t ON t.task_id = c.task_id "
    "WHERE c.at >= ? AND c.at < ? "
    "GROUP BY substr(c.at, 1, 10), t.template_id ORDER BY 1, 2"
)
STATEMENTS: Final = (TASKS_BY_DAY, STEPS_BY_DAY, MODELS_BY_DAY, TEMPLATES_BY_DAY)


@dataclass(frozen=True, slots=True)
class TasksCreated:
    """Tasks of one kind created on one day."""

    day: date
    # a str only for a row whose kind column names no runner (UnreadableTask's case)
    kind: TaskKind | str
    created: int


@dataclass(frozen=True, slots=True)
class StepsStarted:
    day: date
    started: int


@dataclass(frozen=True, slots=True)
class CallUsage:
    """Model calls summed: how many, their tokens and their cost in US dollars."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float

    def plus(self, other: CallUsage) -> CallUsage:
        return CallUsage(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True, slots=True)
class ModelDay:
    """One model's calls on one day."""

    day: date
    provider: str
    model: str
    usage: CallUsage


@dataclass(frozen=True, slots=True)
class TemplateDay:
    """The calls on one day of tasks made from one template (None: the task is gone)."""

    day: date
    template_id: str | None
    usage: CallUsage


@dataclass(frozen=True, slots=True)
class StoredActivity:
    """What the journal holds of the days `[since, until)`; a day with nothing is absent."""

    since: date
    until: date
    tasks: tuple[TasksCreated, ...]
    steps: tuple[StepsStarted, ...]
    models: tuple[ModelDay, ...]
    templates: tuple[TemplateDay, ...]


def activity(conn: Tx, since: date, until: date) -> StoredActivity:
    """The activity of the days from `since` up to, not including, `until`."""
    window = (since.isoformat(), until.isoformat())
    tasks = tuple(
        TasksCreated(_day(r[0]), _kind(r[1]), int(r[2]))
        for r in conn.execute(TASKS_BY_DAY, window).fetchall()
    )
    steps = tuple(
        StepsStarted(_day(r[0]), int(r[1])) for r in conn.execute(STEPS_BY_DAY, window).fetchall()
    )
    models = tuple(
        ModelDay(_day(r[0]), r[1], r[2], _usage(r[3:]))
        for r in conn.execute(MODELS_BY_DAY, window).fetchall()
    )
    templates = tuple(
        TemplateDay(_day(r[0]), r[1], _usage(r[2:]))
        for r in conn.execute(TEMPLATES_BY_DAY, window).fetchall()
    )
    return StoredActivity(since, until, tasks, steps, models, templates)


def _day(text: str) -> date:
    return date.fromisoformat(text)


def _kind(value: str) -> TaskKind | str:
    try:
        return TaskKind(value)
    except ValueError:
        return value


def _usage(row: Sequence[Any]) -> CallUsage:
    # int() and float(): PostgreSQL sums integers as numeric
    return CallUsage(int(row[0]), int(row[1]), int(row[2]), float(row[3]))
