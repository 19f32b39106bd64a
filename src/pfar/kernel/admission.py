"""Admission (seed 001, Phase 1.2): at most `[scheduler] max_concurrent` tasks run at
once, the highest priority first, then the oldest wait first; and none starts while
the inference proxy has no rate headroom (model calls already wait for the
provider's budget), so new tasks do not crowd out the calls of running ones.

A task holds a slot while a coroutine of its runner runs: one parked on the owner or
on a subtask holds none (it has no coroutine), so a parent never keeps its child out.
With `max_concurrent = 0` (the default) every task runs at once, as before.

Whether a task starts or waits is decided once, when it `enter`s: a new task enters in
the commit that creates it (so the bus says TaskStarted only for a task that did
start, docs/events.md), and after a restart every task to go on enters the queue
before any is admitted (`enter_all`), so they start by priority and not in the order
recovery listed them. A task entered ahead of its coroutine is forgotten (its slot
handed on) if the coroutine ends before it takes the slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from ..journal.records import now_rfc3339


@dataclass(order=True)
class _Waiter:
    sort: tuple[int, int]  # (-priority, arrival): heapq pops the highest priority first
    task_id: str = field(compare=False)
    priority: int = field(compare=False)
    since: str = field(compare=False)
    admitted: asyncio.Event = field(compare=False, default_factory=asyncio.Event)
    waits: bool = field(compare=False, default=True)  # it entered the queue, not a slot


@dataclass(frozen=True, slots=True)
class Waiting:
    """A task waiting for a slot, as `pfar queue` shows it."""

    task_id: str
    priority: int
    since: str
    position: int  # 1: the next to run
    reason: str


RECHECK_SECONDS = 0.5  # how often a queue held back by the rate limit looks again


class Admission:
    def __init__(
        self, max_concurrent: int, headroom: Callable[[], str | None] = lambda: None
    ) -> None:
        self.max_concurrent = max_concurrent
        self.running = 0
        self.headroom = headroom  # None, or why no task may start now
        self._queue: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._recheck: asyncio.TimerHandle | None = None
        self._entered: dict[str, _Waiter] = {}  # decided, their coroutine not yet in `slot`

    def enter(self, task_id: str, priority: int = 0) -> bool:
        """Decide now whether `task_id` starts (True: it holds a slot from here) or waits
        in the queue (False); its `slot()` goes on from this decision."""
        if not self.max_concurrent:
            return True  # no limit: nothing to hold ahead, `slot()` just counts it
        waiter = self._waiter(task_id, priority)
        if self.running < self.max_concurrent and not self._queue and self.headroom() is None:
            self.running += 1
            waiter.waits = False
            waiter.admitted.set()
        else:
            heapq.heappush(self._queue, waiter)
        self._entered[task_id] = waiter
        return not waiter.waits

    def enter_all(self, tasks: list[tuple[str, int]]) -> None:
        """After a restart: every task (id, priority) into the queue first, then the free
        slots go to the highest priority, the oldest first. A task admitted here never
        counts as having waited (it is not journaled Queued only to leave at once)."""
        if not self.max_concurrent:
            return
        entered = []
        for task_id, priority in tasks:
            waiter = self._waiter(task_id, priority)
            heapq.heappush(self._queue, waiter)
            self._entered[task_id] = waiter
            entered.append(waiter)
        self._admit()
        for waiter in entered:
            waiter.waits = not waiter.admitted.is_set()

    def forget(self, task_id: str) -> None:
        """A task entered ahead whose coroutine ended before taking its slot (its
        creation failed, the event was a redelivery, it was cancelled): out of the
        queue, or its slot handed on."""
        waiter = self._entered.pop(task_id, None)
        if waiter is None:
            return
        if waiter.admitted.is_set():
            self._release()
        else:
            self._queue.remove(waiter)
            heapq.heapify(self._queue)

    def _waiter(self, task_id: str, priority: int) -> _Waiter:
        return _Waiter((-priority, next(self._arrivals)), task_id, priority, now_rfc3339())

    @contextlib.asynccontextmanager
    async def slot(
        self,
        task_id: str,
        priority: int = 0,
        queued: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[bool]:
        """Hold a slot for the body; yields whether the task had to wait for it.
        `queued` is awaited once when it waits (the kernel journals it Queued), even
        if a slot came free meanwhile: a task that did not start at once goes through
        TaskQueued and TaskScheduled, never TaskStarted."""
        if task_id not in self._entered:
            self.enter(task_id, priority)
        waiter = self._entered.pop(task_id, None)
        if waiter is None:
            self.running += 1  # no limit: counted only
            waited = False
        else:
            waited = waiter.waits
        if waiter is not None and waited:
            try:
                self._admit()  # a free slot held back only by the rate limit: look again
                if queued is not None:
                    await queued()
                await waiter.admitted.wait()
            except BaseException:
                if waiter.admitted.is_set():
                    self._release()  # admitted as it was cancelled: hand the slot on
                else:
                    self._queue.remove(waiter)
                    heapq.heapify(self._queue)
                raise
        try:
            yield waited
        finally:
            self._release()

    def _release(self) -> None:
        self.running -= 1
        self._admit()

    def _admit(self) -> None:
        """Start the next waiters while there are slots and rate headroom; with slots but
        no headroom, look again soon (the limiter's minute moves on by itself)."""
        while self._queue and (not self.max_concurrent or self.running < self.max_concurrent):
            if self.headroom() is not None:
                if self._recheck is None:
                    self._recheck = asyncio.get_running_loop().call_later(
                        RECHECK_SECONDS, self._rechecked
                    )
                return
            nxt = heapq.heappop(self._queue)
            self.running += 1
            nxt.admitted.set()

    def _rechecked(self) -> None:
        self._recheck = None
        self._admit()

    def waiting(self) -> list[Waiting]:
        reason = f"concurrency: {self.running} of {self.max_concurrent} running"
        if self.running < self.max_concurrent:
            reason = self.headroom() or reason
        ordered = sorted(self._queue)
        return [
            Waiting(w.task_id, w.priority, w.since, n, reason) for n, w in enumerate(ordered, 1)
        ]
