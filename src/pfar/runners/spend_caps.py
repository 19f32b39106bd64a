"""The spend caps' decision: whether a model call may go out, from what was spent (the
journal's sums), what the next call may cost, the caps of `[budget]` and what the
owner added to them. Pure: the gate (spend_gate.py) reads the numbers and acts.

A cap is reached when what was spent plus the next call's estimate comes to it: the
call that would pass it is held before it goes out, never found out after. The
estimate is the request's size (4 characters a token) in, and its whole `max_tokens`
out, priced as its model is; a model with no price adds no dollars (its tokens still
count against a cap in tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ..errors import PfarError
from ..journal.costs_sql import Spent
from ..money import dollars

Scope = Literal["task", "day", "month"]
Unit = Literal["usd", "tokens"]


@dataclass(frozen=True, slots=True)
class NextCall:
    """What the call about to go out may spend, at most."""

    usd: float
    tokens: int


@dataclass(frozen=True, slots=True)
class Raised:
    """What the owner added to a cap by answering "continue"."""

    usd: float = 0.0
    tokens: int = 0

    def plus(self, unit: Unit, more: float) -> Raised:
        if unit == "usd":
            return Raised(self.usd + more, self.tokens)
        return Raised(self.usd, self.tokens + int(more))


@dataclass(frozen=True, slots=True)
class CapReached:
    """A cap the next call would reach: its scope ("task", or the day or month `period`
    names), in dollars or tokens, what was spent, the cap with the owner's additions,
    what the next call may add, and how much a "continue" adds (the configured cap)."""

    scope: Scope
    period: str  # the task's id, or the day ("2026-12-06") or month ("2026-12"), UTC
    unit: Unit
    spent: float
    cap: float
    next_call: float
    more: float

    def amount(self, value: float) -> str:
        if self.unit == "tokens":
            return f"{int(value):,} tokens"
        return dollars(value)

    def question(self, title: str) -> str:
        """The owner's question: spent $X of $Y, continue with $Z more, or stop?"""
        where = {"task": f"Task {title}", "day": "Today", "month": "This month"}[self.scope]
        whose = "its" if self.scope == "task" else f"the {self.scope}'s"
        about = (
            ""
            if self.scope == "task"
            else f" (UTC {self.period}; task {title} waits, and so will every task's next "
            "model call: `pfar approvals` lists them)"
        )
        return (
            f"{where} has spent {self.amount(self.spent)} of {whose} cap of "
            f"{self.amount(self.cap)}{about}, and its next model call may cost up to "
            f"{self.amount(self.next_call)}: continue with {self.amount(self.more)} more, "
            "or fail the task?"
        )


class SpendCapReached(PfarError):
    """A model call was held: it would reach a spend cap. The runner parks its task on
    a question to the owner; nothing was sent."""

    code = "spend_cap_reached"

    def __init__(self, task_id: str, cap: CapReached) -> None:
        super().__init__(f"task {task_id}: {cap.question(task_id[:8])}")
        self.task_id, self.cap = task_id, cap


def periods(now: datetime | None = None) -> tuple[str, str]:
    """Today's and this month's names in UTC ("2026-12-06", "2026-12")."""
    day = (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
    return day, day[:7]


def reached(
    scope: Scope,
    period: str,
    spent: Spent,
    nxt: NextCall,
    cap_usd: float | None,
    cap_tokens: int | None,
    raised: Raised,
) -> CapReached | None:
    """The first of the two caps (dollars, then tokens) the next call would reach."""
    if cap_usd is not None and spent.cost_usd + nxt.usd >= cap_usd + raised.usd:
        return CapReached(
            scope, period, "usd", spent.cost_usd, cap_usd + raised.usd, nxt.usd, cap_usd
        )
    if cap_tokens is not None and spent.tokens + nxt.tokens >= cap_tokens + raised.tokens:
        return CapReached(
            scope,
            period,
            "tokens",
            spent.tokens,
            cap_tokens + raised.tokens,
            nxt.tokens,
            cap_tokens,
        )
    return None
