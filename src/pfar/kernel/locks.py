"""Resource locks (seed 001, 4.3) inside one kernel: what a loop task's tool call declares
(a file shared to read, exclusive to change; a repository; a host) is held while the
call runs, through the step executor's seam (`Services.hold`).

Locks are taken in sorted order, so two calls never wait on each other in a cycle. A
call that cannot have its locks within `[scheduler] lock_timeout_seconds` gets
"Resource locked by another task" as its result (the model sees it and can try again
later); while it waits, `pfar queue` shows the resource and who holds it. A kernel
holds its locks in memory: a killed kernel holds none after its restart, so a lock
never outlives its holder. Leases that several kernels share come with the
PostgreSQL store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ResourceLocked
from ..hooks import HookPoint
from ..journal.records import now_rfc3339
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


# the ResourceLock* hooks (seed 001, 4.3): fired outside any lock's own guard
Observer = Callable[[HookPoint, dict[str, Any]], Awaitable[None]]


class LockManager:
    def __init__(self, timeout: float = 60.0, observe: Observer | None = None) -> None:
        self.timeout = timeout
        self.observe = observe
        self._locks: dict[tuple[str, str], _Lock] = {}
        self._waiting: dict[str, Waiting] = {}

    @contextlib.asynccontextmanager
    async def hold(self, holder: str, resources: tuple[Resource, ...]) -> AsyncIterator[None]:
        """Hold `resources` (sorted: no cycle) for the body; ResourceLocked after the
        timeout, holding nothing."""
        taken: list[Resource] = []
        try:
            for resource in sorted(set(resources)):
                await self._acquire(holder, resource)
                taken.append(resource)
            yield
        finally:
            for resource in reversed(taken):
                await self._release(holder, resource)
                if self.observe is not None:
                    await self.observe(HookPoint.ResourceLockReleased, _about(holder, resource))

    async def _acquire(self, holder: str, resource: Resource) -> None:
        lock = self._locks.setdefault((resource.kind, resource.name), _Lock())
        if self.observe is not None:
            async with lock.changed:
                busy = not lock.free_for(holder, resource.mode)
                lock.waiting += 1  # kept in the table while the hook runs
            try:
                if busy:
                    held = sorted(h.split(":")[0] for h in lock.holders)
                    about = {**_about(holder, resource), "held_by": held}
                    await self.observe(HookPoint.ResourceLockWait, about)
            finally:
                lock.waiting -= 1
        await self._take(lock, holder, resource)
        if self.observe is not None:
            await self.observe(HookPoint.ResourceLockAcquired, _about(holder, resource))

    async def _take(self, lock: _Lock, holder: str, resource: Resource) -> None:
        async with lock.changed:
            if not lock.free_for(holder, resource.mode):
                held_by = ", ".join(f"task {h.split(':')[0][:8]}" for h in lock.holders)
                self._waiting[holder] = Waiting(
                    holder.split(":", maxsplit=1)[0],
                    0,
                    now_rfc3339(),
                    0,  # not in the slot queue: waiting for a lock
                    f"lock: {resource.kind} {resource.name} held by {held_by}",
                )
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
                    self._waiting.pop(holder, None)
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

    def waiting(self) -> list[Waiting]:
        return list(self._waiting.values())


def _about(holder: str, resource: Resource) -> dict[str, Any]:
    task_id, _, step = holder.partition(":")
    return {
        "task_id": task_id,
        "step": int(step) if step.isdigit() else None,
        "resource": {"kind": resource.kind, "name": resource.name, "mode": resource.mode},
    }
