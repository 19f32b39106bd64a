"""The task lifecycle hooks (TaskCreated … TaskCancelled), fed from the event bus.

A task's lifecycle events are committed with the move they describe (journal/bus_sql.py);
this feed is one more subscriber (`hooks`) that fires each event's hook point and then
keeps its offset. So a lifecycle hook fires after the move is durable, in commit
order, and, across a crash, at least once: an event whose handlers ran but whose
offset was not yet kept fires again after the restart. These points only observe, so
a second firing changes nothing a task does.

A home that never had lifecycle hooks starts the feed at the bus's end: installing a
hook does not replay the history.
"""

from __future__ import annotations

import asyncio
import logging

from ..hook_points import LIFECYCLE, HookPoint
from ..hooks import Hooks
from ..journal.bus_sql import BusEventKind
from ..journal.store import Store

log = logging.getLogger("pfar.hooks")

SUBSCRIBER = "hooks"
# the hook point each lifecycle event fires (a point and its event share their name)
_POINTS: dict[BusEventKind, HookPoint] = {
    k: HookPoint(k.value) for k in BusEventKind if k.value in {p.value for p in LIFECYCLE}
}
POLL_SECONDS = 0.2
PAGE = 100


async def run(journal: Store, hooks: Hooks, wake: asyncio.Event) -> None:
    """Fire lifecycle hooks for the kernel's life. The handlers are looked at each
    round: `pfar reload` may add the first ones (the feed then starts, at the bus's end
    when it never ran here) or take the last ones away."""
    after: int | None = None
    while True:
        points = {p for p in LIFECYCLE if hooks.wants(p)}
        if points and after is None:
            after = await journal.events.bus_offset(SUBSCRIBER)
            if after is None:
                after = await journal.events.bus_last()
                await journal.events.bus_ack(SUBSCRIBER, after)
        if points and after is not None:
            events = await journal.events.bus(after, PAGE)
            for event in events:
                point = _POINTS.get(event.kind)
                if point in points:
                    await hooks.observe(point, event.to_json())
                after = event.seq
            if events:
                await journal.events.bus_ack(SUBSCRIBER, after)
                continue
        wake.clear()
        try:
            async with asyncio.timeout(POLL_SECONDS):
                await wake.wait()
        except TimeoutError:
            pass
