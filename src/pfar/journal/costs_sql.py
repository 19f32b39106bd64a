"""What model calls cost: summed by day, model, template or task over a window of days,
and the sums the spend caps read (one window's calls, however many tasks made them).

Timestamps are RFC 3339 text in UTC (timestamps.py), so a window `[since, until)` of
days is the text range `since <= at < until` (activity_sql.py says why that is exact),
read through `llm_calls(at)`; no bound is no limit on that side. The caps' day and
month sums read `llm_spend_days` (schema 15), kept up with each call. A call whose model had
no price (schema 15's `priced` = 0) counts its tokens and no dollars, and each sum says
how many such calls it holds, so "unknown" never reads as "free".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .tx import Tx

CostsBy = Literal["day", "model", "template", "task"]
COSTS_BY: Final[tuple[CostsBy, ...]] = ("day", "model", "template", "task")

_SUMS = (
    "count(*), coalesce(sum(c.input_tokens), 0), coalesce(sum(c.output_tokens), 0), "
    "coalesce(sum(c.cost_usd), 0), coalesce(sum(1 - c.priced), 0)"
)
# the group each `by` sums into; a call whose task is gone has no template (NULL)
_KEYS: Final[dict[CostsBy, str]] = {
    "day": "substr(c.at, 1, 10)",
    "model": "c.model",
    "template": "t.template_id",
    "task": "c.task_id",
}


@dataclass(frozen=True, slots=True)
class Spent:
    """Model calls summed: how many, their tokens, their cost in US dollars, and how
    many of them had no price (their cost is unknown and not in `cost_usd`)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class CostRow:
    """One group's calls: a day ("YYYY-MM-DD"), a model, a template or a task (None: a
    template of a task that is gone)."""

    key: str | None
    spent: Spent


@dataclass(frozen=True, slots=True)
class StoredCosts:
    """The window's groups, most costly first (by day: oldest first), and the models
    whose calls had no price."""

    by: CostsBy
    rows: tuple[CostRow, ...]
    unpriced_models: tuple[str, ...]


def _where(since: str | None, until: str | None) -> tuple[str, tuple[str, ...]]:
    terms, args = [], []
    if since is not None:
        terms.append("c.at >= ?")
        args.append(since)
    if until is not None:
        terms.append("c.at < ?")
        args.append(until)
    return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)


def costs(conn: Tx, by: CostsBy, since: str | None, until: str | None) -> StoredCosts:
    """The calls made in `[since, until)` (days, "YYYY-MM-DD"; None: unbounded) by `by`."""
    key = _KEYS[by]
    where, args = _where(since, until)
    join = " LEFT JOIN task_journal t ON t.task_id = c.task_id" if by == "template" else ""
    order = "1" if by == "day" else f"5 DESC, 2 DESC, coalesce({key}, '')"
    rows = conn.execute(
        f"SELECT {key}, {_SUMS} FROM llm_calls c{join}{where} GROUP BY {key} ORDER BY {order}",
        args,
    ).fetchall()
    unpriced = conn.execute(
        f"SELECT DISTINCT c.model FROM llm_calls c{where}"
        + (" AND" if where else " WHERE")
        + " c.priced = 0 ORDER BY 1",
        args,
    ).fetchall()
    return StoredCosts(
        by, tuple(CostRow(r[0], _spent(r[1:])) for r in rows), tuple(r[0] for r in unpriced)
    )


def spent_between(conn: Tx, since: str, until: str) -> Spent:
    """Every call made on the UTC days `[since, until)` (days, or months: "2026-12"
    sorts before its first day): a day's or a month's spending, for its cap. Read from
    the days' sums (`llm_spend_days`, a row a day), kept when calls are pruned."""
    row = conn.execute(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0), "
        "coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0), "
        "coalesce(sum(unpriced), 0) FROM llm_spend_days WHERE day >= ? AND day < ?",
        (since, until),
    ).fetchone()
    return _spent(row)


def add_to_day_txn(
    conn: Tx, at: str, input_tokens: int, output_tokens: int, cost_usd: float, priced: bool
) -> None:
    """Count one call (made `at`, an RFC 3339 stamp) in its UTC day's sums."""
    conn.execute(
        "INSERT INTO llm_spend_days(day, calls, input_tokens, output_tokens, cost_usd, unpriced) "
        "VALUES (?, 1, ?, ?, ?, ?) ON CONFLICT(day) DO UPDATE SET "
        "calls = llm_spend_days.calls + 1, "
        "input_tokens = llm_spend_days.input_tokens + excluded.input_tokens, "
        "output_tokens = llm_spend_days.output_tokens + excluded.output_tokens, "
        "cost_usd = llm_spend_days.cost_usd + excluded.cost_usd, "
        "unpriced = llm_spend_days.unpriced + excluded.unpriced",
        (at[:10], input_tokens, output_tokens, cost_usd, 0 if priced else 1),
    )


def spent_by_task(conn: Tx, task_id: str) -> Spent:
    """A task's calls (idx_llm_calls_task)."""
    row = conn.execute(f"SELECT {_SUMS} FROM llm_calls c WHERE c.task_id = ?", (task_id,))
    return _spent(row.fetchone())


def spent_by_tasks(conn: Tx, task_ids: Sequence[str]) -> dict[str, Spent]:
    """Each task's calls, for a page of a listing (a task with none is absent); the ids
    are read a few hundred at a time, within any backend's limit of parameters."""
    found: dict[str, Spent] = {}
    for at in range(0, len(task_ids), _IDS_A_READ):
        ids = task_ids[at : at + _IDS_A_READ]
        marks = ", ".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT c.task_id, {_SUMS} FROM llm_calls c WHERE c.task_id IN ({marks}) "
            "GROUP BY c.task_id",
            tuple(ids),
        ).fetchall()
        found.update((r[0], _spent(r[1:])) for r in rows)
    return found


_IDS_A_READ = 500


def _spent(row: Sequence[Any]) -> Spent:
    # int() and float(): PostgreSQL sums integers as numeric
    return Spent(int(row[0]), int(row[1]), int(row[2]), float(row[3]), int(row[4]))
