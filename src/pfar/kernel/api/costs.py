"""The operator API's `costs`: what model calls cost, by day, model, template or task,
over a window of UTC days (both ends included, either left open), with the models whose
calls had no price named (their tokens count, their cost is unknown)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from ...errors import BadRequest
from ...journal.costs_sql import COSTS_BY, Spent
from ...journal.store import Store
from ...llm.price_table import TAKEN


@dataclass(frozen=True, slots=True)
class CostLine:
    """One group's calls: a day, a model, a template or a task (None: the template of
    calls whose task is gone; the total's line)."""

    key: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced_calls: int  # calls whose model had no price: not in cost_usd

    @classmethod
    def of(cls, key: str | None, s: Spent) -> CostLine:
        return cls(key, s.calls, s.input_tokens, s.output_tokens, s.cost_usd, s.unpriced)


@dataclass(frozen=True, slots=True)
class Costs:
    """The window's groups (by day oldest first, else the most costly first), their
    total, the models with no price, and the date of pfar's price table."""

    by: str
    since: str | None  # YYYY-MM-DD, included; None: from the first call
    until: str | None  # YYYY-MM-DD, included; None: up to now
    lines: tuple[CostLine, ...]
    total: CostLine
    unpriced_models: tuple[str, ...]
    prices_taken: str


def _day(value: str | None, field: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise BadRequest(field, f"must be a day as YYYY-MM-DD, not {value!r}") from None


async def costs(
    journal: Store, by: str = "day", since: str | None = None, until: str | None = None
) -> Costs:
    """Model calls from `since` to `until` (UTC days, both included) summed by `by`.

    Raises:
        BadRequest: naming `by`, `since` or `until` when it is not one this reads.
    """
    if by not in COSTS_BY:
        raise BadRequest("by", f"must be one of {', '.join(COSTS_BY)}, not {by!r}")
    first, last = _day(since, "since"), _day(until, "until")
    if first is not None and last is not None and last < first:
        raise BadRequest("until", f"{until} is before since ({since})")
    # the last day there is (9999-12-31) has no next day: up to it is up to the end
    end = None if last is None or last == date.max else (last + timedelta(days=1)).isoformat()
    stored = await journal.tasks.costs(by, first.isoformat() if first is not None else None, end)
    total = Spent()
    for row in stored.rows:
        s = row.spent
        total = Spent(
            total.calls + s.calls,
            total.input_tokens + s.input_tokens,
            total.output_tokens + s.output_tokens,
            total.cost_usd + s.cost_usd,
            total.unpriced + s.unpriced,
        )
    return Costs(
        by=by,
        since=first.isoformat() if first is not None else None,
        until=last.isoformat() if last is not None else None,
        lines=tuple(CostLine.of(r.key, r.spent) for r in stored.rows),
        total=CostLine.of(None, total),
        unpriced_models=stored.unpriced_models,
        prices_taken=TAKEN,
    )
