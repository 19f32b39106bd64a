"""Admission (seed 001, Phase 1.2): at most `[scheduler] max_concurrent` tasks run at
once, the highest priority first, then the oldest wait first; and none starts while
the inference proxy has no rate headroom (model calls already wait for the
provider's budget), so new tasks do not crowd out the calls of running ones.

A task holds a slot while a coroutine of its runner runs: one parked on the owner or
on a subtask holds none (it has no coroutine), so a parent never keeps its child out.
With `max_concurrent = 0` (the default) every task runs at once, as before.
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


@dataclass(frozen=True, slots=True)
class Waiting:
    """A task waiting for a slot, as `pfar queue` shows it."""

    task_id: str
    priority: int
    since: str
    position: int  # 1: the next to run
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "task_id": self.task_id,
            "priority": self.priority,
            "since": self.since,
            "position": self.position,
            "reason": self.reason,
        }


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

    @contextlib.asynccontextmanager
    async def slot(
        self,
        task_id: str,
        priority: int = 0,
        queued: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[bool]:
        """Hold a slot for the body; yields whether the task had to wait for it.
        `queued` is awaited once when it must wait (the kernel journals it Queued)."""
        waited = False
        if self.max_concurrent and (
            self.running >= self.max_concurrent or self._queue or self.headroom() is not None
        ):
            waited = True
            waiter = _Waiter((-priority, next(self._arrivals)), task_id, priority, now_rfc3339())
            heapq.heappush(self._queue, waiter)
            try:
                self._admit()  # a free slot held back only by the rate limit: look again
                if queued is not None and not waiter.admitted.is_set():
                    await queued()
                await waiter.admitted.wait()
            except BaseException:
                if waiter.admitted.is_set():
                    self._release()  # admitted as it was cancelled: hand the slot on
                else:
                    self._queue.remove(waiter)
                    heapq.heapify(self._queue)
                raise
        else:
            self.running += 1
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
