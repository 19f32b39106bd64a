"""The bell a live view of the event bus waits on: rung after each commit of this
kernel's journal that appended a bus event, and once more when the kernel stops.

It is the journal writer's commit watcher (group_commit.CommitWatcher), told after the
COMMIT is durable, so a reader it wakes finds the events committed. The watcher that
keeps vault/acknowledged up (kernel/acknowledging.py) is told through it, first.

A waiter takes a `ticket` before it reads the bus and waits on it after: a commit
between the read and the wait has rung that ticket already, so no event is left
unread until the next commit. A ring with no new event (a batch that was rolled back,
another kernel's commit in the same process) only costs the waiter one read.
"""

from __future__ import annotations

import asyncio

from ..journal import bus_sql
from ..journal.group_commit import CommitWatcher
from ..journal.tx import Tx


class BusBell:
    def __init__(self) -> None:
        self.inner: CommitWatcher | None = None  # told first (vault/acknowledged)
        self.closed = False
        self._appended = bus_sql.APPENDED[0]
        self._rung = asyncio.Event()

    def inside(self, tx: Tx) -> None:
        if self.inner is not None:
            self.inner.inside(tx)

    def committed(self) -> None:
        if self.inner is not None:
            self.inner.committed()
        appended = bus_sql.APPENDED[0]
        if appended != self._appended:  # events went in since the last commit
            self._appended = appended
            self._ring()

    def ticket(self) -> asyncio.Event:
        """Set by the next ring (a commit with events, or the kernel's stop)."""
        return self._rung

    def close(self) -> None:
        """The kernel stops: every waiter wakes and finds the bell closed."""
        self.closed = True
        self._ring()

    def _ring(self) -> None:
        rung, self._rung = self._rung, asyncio.Event()
        rung.set()
