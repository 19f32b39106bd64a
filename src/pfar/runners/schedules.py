"""Cron triggers (seed 001, Phase 1.2): which slots of a template's schedule to fire now.

A template with `trigger = "cron:EXPR"` gets a task for every slot of its schedule,
in its `[schedule] timezone`. The slot is the task's event id, so a slot fires once
across crashes and restarts: the journal refuses a second task for the same event.

`plan` is pure (the clock is an argument), so catch-up is tested without sleeping:

* the newest slot, when not older than `grace`, is simply due: it fires;
* the others were missed while pfar was down (or its loop was held up), and follow
  the template's `catch_up`: `none` fires none of them, `latest` fires the newest
  when no slot is due now, `all` fires every one within the recovery window;
* a schedule seen for the first time starts after now: slots before it are not
  "missed", they are before its time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from croniter import croniter

CatchUp = Literal["none", "latest", "all"]
PREFIX = "cron:"
MAX_SLOTS = 10_000  # slots looked at in one plan (a minutely schedule down for a week)


def expression(trigger: str) -> str | None:
    """The cron expression of a `cron:` trigger, else None."""
    return trigger[len(PREFIX) :].strip() if trigger.startswith(PREFIX) else None


def _croniter() -> type[croniter]:
    """croniter, imported when a schedule is first looked at: with its dependencies it
    costs every start of a kernel whose templates have none several milliseconds."""
    from croniter import croniter

    return croniter


def valid(expr: str) -> bool:
    return bool(_croniter().is_valid(expr))


@dataclass(frozen=True, slots=True)
class Due:
    """What a template's schedule asks for now."""

    template_id: str
    fire: tuple[datetime, ...]  # slots to create a task for (UTC, oldest first)
    missed: int  # slots older than the grace
    skipped: int  # ... of which none fires (the catch_up policy)
    last: datetime  # the newest slot looked at: the schedule's position after this plan

    def event_id(self, slot: datetime) -> str:
        return slot_event(self.template_id, slot)


def slot_event(template_id: str, slot: datetime) -> str:
    return f"cron:{template_id}:{slot.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def plan(
    template_id: str,
    expr: str,
    timezone: str,
    catch_up: CatchUp,
    last: datetime | None,
    now: datetime,
    *,
    window: timedelta,
    grace: timedelta = timedelta(seconds=90),
) -> Due:
    """The slots of `expr` after `last` up to `now`, and which of them fire."""
    zone = ZoneInfo(timezone)
    local_now = now.astimezone(zone)
    if last is None:  # a new schedule: it starts after now
        newest = _croniter()(expr, local_now).get_prev(datetime)
        return Due(template_id, (), 0, 0, newest.astimezone(UTC))
    slots: list[datetime] = []
    it = _croniter()(expr, last.astimezone(zone))
    while len(slots) < MAX_SLOTS:
        slot = it.get_next(datetime).astimezone(UTC)
        if slot > now:
            break
        slots.append(slot)
    if not slots:
        return Due(template_id, (), 0, 0, last)
    # only the newest slot can be due: the loop wakes at each slot, so an older one
    # was missed (a minutely schedule must not fire twice because of the grace)
    due = slots[-1:] if slots[-1] >= now - grace else []
    missed = slots[: len(slots) - len(due)]
    if catch_up == "all":
        caught = [s for s in missed if s >= now - window]
    elif catch_up == "latest" and missed and not due:
        caught = missed[-1:]
    else:
        caught = []
    return Due(
        template_id,
        tuple(caught + due),
        len(missed),
        len(missed) - len(caught),
        slots[-1],
    )


def next_slot(expr: str, timezone: str, after: datetime) -> datetime:
    """The first slot of `expr` after `after` (UTC)."""
    zone = ZoneInfo(timezone)
    return _croniter()(expr, after.astimezone(zone)).get_next(datetime).astimezone(UTC)
