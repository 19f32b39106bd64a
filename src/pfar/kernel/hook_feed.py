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
import contextlib
import logging

from ..hook_points import LIFECYCLE, HookPoint
from ..hooks import Hooks
from ..journal.bus_sql import BusEventKind
from ..journal.store import Store
from .bus_bell import BusBell

log = logging.getLogger("pfar.hooks")

SUBSCRIBER = "hooks"
# the hook point each lifecycle event fires (a point and its event share their name)
_POINTS: dict[BusEventKind, HookPoint] = {
    k: HookPoint(k.value) for k in BusEventKind if k.value in {p.value for p in LIFECYCLE}
}
PAGE = 100
# a journal on a server may be shared with other kernels, whose commits ring no bell
# here: the feed looks again this often while nothing rings
SHARED_LOOK_SECONDS = 1.0
RELOAD_LOOK_SECONDS = 0.2


async def run(journal: Store, hooks: Hooks, bell: BusBell) -> None:
    """Fire lifecycle hooks for the kernel's life, woken by the bell each commit that
    appended an event rings (kernel/bus_bell.py). The handlers are looked at each
    round: `pfar reload` may add the first ones (the feed then starts, at the bus's end
    when it never ran here) or take the last ones away."""
    wait = None if journal.path is not None else SHARED_LOOK_SECONDS
    after: int | None = None
    while not bell.closed:
        points = {p for p in LIFECYCLE if hooks.wants(p)}
        if not points:
            # no lifecycle handler: the bell, rung at every commit, is not listened to;
            # it looks this often for the ones a `pfar reload` adds (from the bus's end)
            await asyncio.sleep(RELOAD_LOOK_SECONDS)
            continue
        rung = bell.ticket()  # before the read: a commit after it rings this ticket
        if after is None:
            after = await journal.events.bus_offset(SUBSCRIBER)
            if after is None:
                after = await journal.events.bus_last()
                await journal.events.bus_ack(SUBSCRIBER, after)
        if after is not None:
            events = await journal.events.bus(after, PAGE)
            for event in events:
                point = _POINTS.get(event.kind)
                if point in points:
                    await hooks.observe(point, event.to_json())
                after = event.seq
            if events:
                await journal.events.bus_ack(SUBSCRIBER, after)
                continue
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await rung.wait()
    await asyncio.Event().wait()  # the kernel stops: until its duties are cancelled
