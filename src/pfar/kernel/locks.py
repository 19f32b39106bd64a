"""Resource locks (seed 001, 4.3 and "Lock Recovery"): what a loop task's tool call
declares (a file shared to read, exclusive to change; a repository; a host) is held
while the call runs, through the step executor's seam (`Services.hold`).

Locks are taken in sorted order, so two calls never wait on each other in a cycle. A
call that cannot have its locks within `[scheduler] lock_timeout_seconds` gets
"Resource locked by another task" as its result (the model sees it and can try again
later); while it waits, `pfar queue` and `pfar tasks` show the resource and who holds
it.

Two layers: calls of one kernel wait on each other in memory (woken at once when a
lock is let go); then the locks are journaled (`resource_locks`) with the kernel's
boot, host, pid and the pid's start time, and a lease the kernel renews while it
lives, so kernels sharing a journal (or a process that is not this kernel) see them.
A journaled lock in the way whose holder process is gone (a killed kernel, on this
host) is stale and taken over; one whose holder lives elsewhere is waited on, and
taken when its lease has expired (a holder that stopped renewing it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ResourceLocked
from ..hooks import HookPoint
from ..journal.locks_sql import Alive, LockClaim, LockOwner
from ..journal.records import now_rfc3339
from ..journal.store import LockStore
from ..tools.base import Resource
from .admission import Waiting


@dataclass
class _Lock:
    holders: dict[str, str] = field(default_factory=dict)  # holder -> mode
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    waiting: int = 0  # calls waiting on it: it is dropped only when held and awaited by none

    def free_for(self, holder: str, mode: str) -> bool:
        others = {h: m for h, m in self.holders.items() if h != holder}
        if not others:
            return True
        return mode == "shared" and all(m == "shared" for m in others.values())


log = logging.getLogger("pfar.locks")

# the ResourceLock* hooks (seed 001, 4.3): fired outside any lock's own guard
Observer = Callable[[HookPoint, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LockTable:
    """The journal's lock table, as this kernel holds locks in it."""

    store: LockStore
    owner: LockOwner
    lease_seconds: float
    alive: Alive
    poll_seconds: float = 0.2  # how often a lock held elsewhere is looked at again


class LockManager:
    def __init__(
        self,
        timeout: float = 60.0,
        observe: Observer | None = None,
        table: LockTable | None = None,
    ) -> None:
        self.timeout = timeout
        self.observe = observe
        self.table = table
        self._locks: dict[tuple[str, str], _Lock] = {}
        self._waiting: dict[str, Waiting] = {}

    @contextlib.asynccontextmanager
    async def hold(self, holder: str, resources: tuple[Resource, ...]) -> AsyncIterator[None]:
        """Hold `resources` (sorted: no cycle) for the body; ResourceLocked after the
        timeout, holding nothing."""
        taken: list[Resource] = []
        journaled = False
        deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            for resource in sorted(set(resources)):
                await self._acquire(holder, resource)
                taken.append(resource)
            if self.table is not None and taken:
                await self._journal(self.table, holder, taken, deadline)
                journaled = True
            yield
        finally:
            if journaled and self.table is not None:
                self.table.store.release(holder)
            for resource in reversed(taken):
                await self._release(holder, resource)
                if self.observe is not None:
                    await self.observe(HookPoint.ResourceLockReleased, _about(holder, resource))

    async def _acquire(self, holder: str, resource: Resource) -> None:
        key = (resource.kind, resource.name)
        lock = self._locks.setdefault(key, _Lock())
        # counted from the table look-up to the take: a release meanwhile (while this call
        # waits for the guard, or for a hook) never drops this lock from the table, so
        # no second lock object for the same resource can be made
        lock.waiting += 1
        try:
            if self.observe is not None and not lock.free_for(holder, resource.mode):
                held = sorted(h.split(":")[0] for h in lock.holders)
                about = {**_about(holder, resource), "held_by": held}
                await self.observe(HookPoint.ResourceLockWait, about)
            await self._take(lock, holder, resource)
        finally:
            lock.waiting -= 1
            if not lock.holders and not lock.waiting and self._locks.get(key) is lock:
                del self._locks[key]  # given up (timed out), and no one else wants it
        if self.observe is not None:
            await self.observe(HookPoint.ResourceLockAcquired, _about(holder, resource))

    async def _take(self, lock: _Lock, holder: str, resource: Resource) -> None:
        async with lock.changed:
            if not lock.free_for(holder, resource.mode):
                held_by = ", ".join(f"task {h.split(':')[0][:8]}" for h in lock.holders)
                self._wait(holder, f"lock: {resource.kind} {resource.name} held by {held_by}")
                lock.waiting += 1
                try:
                    async with asyncio.timeout(self.timeout):
                        await lock.changed.wait_for(lambda: lock.free_for(holder, resource.mode))
                except TimeoutError:
                    raise ResourceLocked(
                        f"{resource.kind} {resource.name}",
                        [h for h in lock.holders if h != holder],
                        self.timeout,
                    ) from None
                finally:
                    lock.waiting -= 1
                    self._waited(holder)
            lock.holders[holder] = (
                "exclusive" if lock.holders.get(holder) == "exclusive" else resource.mode
            )

    async def _release(self, holder: str, resource: Resource) -> None:
        key = (resource.kind, resource.name)
        lock = self._locks.get(key)
        if lock is None:
            return
        async with lock.changed:
            lock.holders.pop(holder, None)
            lock.changed.notify_all()
            if not lock.holders and not lock.waiting:
                self._locks.pop(key, None)  # costs grow with what is held, not with history

    async def _journal(
        self, table: LockTable, holder: str, taken: list[Resource], deadline: float
    ) -> None:
        """Journal the locks (all or none), waiting for a live holder elsewhere until
        `deadline`; ResourceLocked then."""
        claims = [LockClaim(r.kind, r.name, r.mode) for r in taken]
        task_id = holder.split(":", maxsplit=1)[0]
        loop = asyncio.get_running_loop()
        waited = False
        try:
            while True:
                other, taken_over = await table.store.acquire(
                    claims, holder, task_id, table.owner, table.lease_seconds, table.alive
                )
                if taken_over:
                    log.warning(
                        "task %s took over %d lock(s) whose holder is gone or whose lease expired",
                        task_id[:8],
                        taken_over,
                    )
                if other is None:
                    return
                what = f"{other.kind} {other.name}"
                if not waited:
                    self._wait(
                        holder,
                        f"lock: {what} held by task {other.task_id[:8]} (pid {other.pid} on "
                        f"{other.host}, lease until {other.lease_until})",
                    )
                if not waited and self.observe is not None:
                    about = {
                        "task_id": task_id,
                        "resource": {"kind": other.kind, "name": other.name},
                        "held_by": [other.task_id],
                    }
                    await self.observe(HookPoint.ResourceLockWait, about)
                waited = True
                left = deadline - loop.time()
                if left <= 0:
                    raise ResourceLocked(what, [other.holder], self.timeout)
                await asyncio.sleep(min(table.poll_seconds, left))
        finally:
            if waited:
                self._waited(holder)

    def _wait(self, holder: str, reason: str) -> None:
        """`holder` waits: shown by `pfar queue` (this kernel) and `pfar tasks` (journal)."""
        task_id = holder.split(":", maxsplit=1)[0]
        self._waiting[holder] = Waiting(task_id, 0, now_rfc3339(), 0, reason)
        if self.table is not None:
            self.table.store.waiting(holder, task_id, self.table.owner.boot_id, reason)

    def _waited(self, holder: str) -> None:
        if self._waiting.pop(holder, None) is not None and self.table is not None:
            self.table.store.waited(holder)

    def waiting(self) -> list[Waiting]:
        return list(self._waiting.values())

    def holding(self) -> bool:
        """Whether any call holds (or waits for) a lock: leases need renewing only then."""
        return bool(self._locks)


def _about(holder: str, resource: Resource) -> dict[str, Any]:
    task_id, _, step = holder.partition(":")
    return {
        "task_id": task_id,
        "step": int(step) if step.isdigit() else None,
        "resource": {"kind": resource.kind, "name": resource.name, "mode": resource.mode},
    }
