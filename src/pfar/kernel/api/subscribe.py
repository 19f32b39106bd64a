"""`Operator.subscribe`: the event bus, live, for a view that watches (a console, a chat).

A subscriber is given the events after the number it starts from, then each event as
its commit makes it durable, in commit order: none skipped, none twice (the bus is
numbered in commit order on both backends, so reading `seq > last` misses nothing).
It waits on the kernel's bell (kernel/bus_bell.py), rung after each commit that
appended an event; it does not look at the journal while nothing is committed.

A live view keeps no offset in the journal: it remembers the last number it was given
and, after it was closed or the kernel stopped, subscribes again from that number. A
subscriber that must handle every event across restarts keeps a durable offset
(`Operator.ack_events`, `pfar events --as`). Events older than the journal's retention
are gone: a view that starts from before them is given what is left.

Each look reads at most a page from where the view stands, so what it costs grows with
the events it is given, not with the bus's history. It runs no task of its own: closing
it (`aclose`, or cancelling the task that iterates) ends it where it waits, and the
kernel's stop ends it (what was committed after its last look is there for the view
that subscribes again from its last number).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ...journal.store import Store
from ..bus_bell import BusBell
from .records import BusEventView

PAGE = 200
# a journal on a server may be shared with other kernels, whose commits ring no bell
# here: a view looks again this often while nothing rings
SHARED_LOOK_SECONDS = 1.0


async def live_events(
    journal: Store, bell: BusBell, after: int, task_id: str | None
) -> AsyncIterator[BusEventView]:
    """The events after `after` (of `task_id` only, when given), then each new one."""
    wait = None if journal.path is not None else SHARED_LOOK_SECONDS
    while not bell.closed:
        rung = bell.ticket()  # before the read: a commit after it rings this ticket
        try:
            page = await journal.events.bus(after, PAGE)
        except Exception:
            if bell.closed:  # the journal closed under the read: the kernel stopped
                return
            raise
        for event in page:
            after = event.seq
            if task_id is None or event.task_id == task_id:
                yield BusEventView.of(event)
        if len(page) == PAGE:
            continue  # more are committed already
        try:
            async with asyncio.timeout(wait):
                await rung.wait()
        except TimeoutError:
            pass
