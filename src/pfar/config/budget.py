"""`[budget]`: spend caps, in US dollars and in tokens, per task, per day and per month.

A cap left out is no cap. Days and months are UTC ones: a day's count starts at 00:00
UTC, a month's on its first day at 00:00 UTC (docs/costs.md).
"""

from __future__ import annotations

from pydantic import Field

from .section import Section


class BudgetConfig(Section):
    # a task about to pass these parks on a question to the owner (continue, or fail)
    per_task_usd: float | None = Field(None, gt=0)
    per_task_tokens: int | None = Field(None, gt=0)
    # every task's calls together: past these, every new model call is held
    per_day_usd: float | None = Field(None, gt=0)
    per_day_tokens: int | None = Field(None, gt=0)
    per_month_usd: float | None = Field(None, gt=0)
    per_month_tokens: int | None = Field(None, gt=0)

    @property
    def any(self) -> bool:
        """Some cap is set (else no call is counted before it goes out)."""
        return any(
            v is not None
            for v in (
                self.per_task_usd,
                self.per_task_tokens,
                self.per_day_usd,
                self.per_day_tokens,
                self.per_month_usd,
                self.per_month_tokens,
            )
        )
