"""The kernel's cron loop: every template with `trigger = "cron:EXPR"` gets a task for each
slot of its schedule, once (runners/schedules.py decides which slots fire).

A slot's task is created with the slot as its event id, so the journal refuses a
second one; the schedule's position (the newest slot looked at) is kept in
`adapter_state` as `schedule:TEMPLATE` and written after the slot's tasks. A kernel
killed in between looks at the same slots again after its restart, and the event ids
make them fire once. At start, slots missed while pfar was down follow each
template's `catch_up`, and the recovery report says what was caught up or skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from ..config import Config
from ..errors import EventIdReused, PfarError, VaultError
from ..journal import TaskRecord
from ..journal.records import parse_rfc3339, rfc3339
from ..journal.store import Store
from ..runners import schedules
from ..runners.schedules import Due
from ..runners.templates import Template, TemplateRegistry
from .admission import Waiting

log = logging.getLogger("pfar.scheduler")

LONGEST_SLEEP = 60.0  # templates are looked at again at least this often (edits, new ones)


def position_name(template_id: str) -> str:
    return f"schedule:{template_id}"


class SchedulerHost(Protocol):
    """What the cron loop uses of the kernel: its templates and settings (both change
    on `pfar reload`), the journal, and submit."""

    templates: TemplateRegistry
    config: Config
    journal: Store

    async def submit(
        self,
        template_id: str,
        text: str,
        *,
        event_id: str | None = None,
        adapter: str = "api",
        principal: str = "owner",
    ) -> TaskRecord: ...


class Scheduler:
    def __init__(self, kernel: SchedulerHost, clock: Callable[[], datetime] | None = None) -> None:
        self._kernel = kernel
        self._clock = clock or (lambda: datetime.now(UTC))
        self._wake = asyncio.Event()

    def nudge(self) -> None:
        """Look at the templates again now (`pfar reload`): a new schedule's first slot
        may come before the round the loop sleeps until."""
        self._wake.set()

    def _scheduled(self) -> list[Template]:
        templates = self._kernel.templates
        found = [templates.get(i) for i in templates.ids()]
        return [t for t in found if t is not None and t.cron is not None]

    async def plans(self) -> list[Due]:
        """What each scheduled template's schedule asks for now."""
        now = self._clock()
        window = timedelta(seconds=self._kernel.config.recovery.max_task_age_seconds)
        found = []
        for tpl in self._scheduled():
            saved = await self._kernel.journal.adapters.get(position_name(tpl.id)) or {}
            last = saved.get("last_slot")
            found.append(
                schedules.plan(
                    tpl.id,
                    tpl.cron or "",
                    tpl.schedule.timezone,
                    tpl.schedule.catch_up,
                    parse_rfc3339(last) if isinstance(last, str) else None,
                    now,
                    window=window,
                )
            )
        return found

    def describe(self, plans: list[Due]) -> list[str]:
        """The recovery report's lines: each schedule that missed slots while pfar was down."""
        lines = []
        for due in plans:
            if not due.missed:
                continue
            tpl = self._kernel.templates.get(due.template_id)
            policy = tpl.schedule.catch_up if tpl else "?"
            caught = due.missed - due.skipped
            what = f"{due.template_id}: {due.missed} slot{'s' if due.missed != 1 else ''} missed"
            if caught:
                when = ", ".join(_local(s, tpl) for s in due.fire[:caught][-3:])
                what += f"; {caught} caught up ({when})"
            if due.skipped:
                what += f"; {due.skipped} skipped (catch_up = {policy})"
            lines.append(what)
        return lines

    async def fire(self, due: Due) -> None:
        """Create the due slots' tasks (each once), then move the schedule's position."""
        tpl = self._kernel.templates.get(due.template_id)
        if tpl is None:
            return
        for slot in due.fire:
            text = tpl.schedule.input or f"Scheduled run of {tpl.title} for {_local(slot, tpl)}"
            try:
                await self._kernel.submit(
                    tpl.id, text, event_id=due.event_id(slot), adapter="schedule"
                )
            except EventIdReused as exc:  # the slot's task exists (made with another input)
                log.warning("schedule %s: slot %s: %s", tpl.id, slot, exc)
            except PfarError as exc:
                # not started (the kernel is stopping, the template broke): the position
                # stays, and the next round (or start) tries the slot again
                log.error("schedule %s: the slot %s did not start a task: %s", tpl.id, slot, exc)
                return
        await self._kernel.journal.adapters.ingested(
            position_name(tpl.id), {"last_slot": rfc3339(due.last)}, []
        )

    async def run(self, first: list[Due] | None = None) -> None:
        """Fire due slots until cancelled, sleeping until the next one (a minute at most)."""
        plans = first
        while True:
            self._wake.clear()  # a nudge from here on wakes the sleep below
            try:
                for due in plans if plans is not None else await self.plans():
                    if due.fire or due.last != await self._saved(due.template_id):
                        await self.fire(due)
                wait = self._until_next()
            except (VaultError, asyncio.CancelledError):
                raise
            except Exception:  # a schedule's bug must not stop the kernel or the others
                log.exception("schedules: a round failed; trying again in a minute")
                wait = LONGEST_SLEEP
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):  # not wait_for: it may swallow a cancel
                    await self._wake.wait()
            plans = None

    async def _saved(self, template_id: str) -> datetime | None:
        saved = await self._kernel.journal.adapters.get(position_name(template_id)) or {}
        last = saved.get("last_slot")
        return parse_rfc3339(last) if isinstance(last, str) else None

    def upcoming(self) -> list[Waiting]:
        """`pfar queue`'s lines for schedules: each scheduled template's next slot (no
        task exists for it yet), soonest first."""
        now = self._clock()
        found = []
        for tpl in self._scheduled():
            slot = schedules.next_slot(tpl.cron or "", tpl.schedule.timezone, now)
            reason = f"schedule: {tpl.id} next runs at {_local(slot, tpl)}"
            found.append(Waiting("", tpl.priority, rfc3339(slot), 0, reason))
        return sorted(found, key=lambda w: w.since)

    def _until_next(self) -> float:
        now = self._clock()
        wait = LONGEST_SLEEP
        for tpl in self._scheduled():
            slot = schedules.next_slot(tpl.cron or "", tpl.schedule.timezone, now)
            wait = min(wait, (slot - now).total_seconds() + 0.05)
        return max(0.05, wait)


def _local(slot: datetime, tpl: Template | None) -> str:
    zone = tpl.schedule.timezone if tpl else "UTC"
    return slot.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M {zone}")
