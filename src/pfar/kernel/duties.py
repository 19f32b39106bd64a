"""The kernel's duties: what runs beside the tasks for as long as the kernel does.

The owner's outbox, the expiry of unanswered questions, the journal's cleanup, the
reconciliation of sandboxes and left processes, the home's free space, the cron
schedules, the lifecycle hooks' feed, the lock leases, learnings left undecided,
tasks held by a day's or month's spend cap, and scheduled backups. Each runs as its
own asyncio task; one that runs out of file descriptors waits and goes on, any other
end of one stops the kernel (the kernel's `on_ended`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..config import Config
from ..hooks import Hooks
from ..journal import OwnerMessage, TaskRecord
from ..journal.message_keys import DiskLowKey, FailedKey, MessageKind
from ..journal.records import now_rfc3339, rfc3339
from ..journal.store import Store
from ..runners.schedules import Due
from ..tools import sandbox
from ..vault.home import Home
from . import descriptors, disk, hook_feed, spend_holds, task_processes
from .answering import Answering
from .audit import AuditLog
from .backups import BackupSchedule, ScheduledBackups
from .bus_bell import BusBell
from .learning import Learner
from .locks import LockManager
from .owner import OwnerChannel
from .scheduler import Scheduler

log = logging.getLogger("pfar.kernel")

SANDBOX_RECONCILE_SECONDS = 30.0
# journal cleanup: rows a commit deletes at most, and the kernel boots kept
CLEANUP_BATCH = 500
KEEP_BOOTS = 100


class DutiesHost(Protocol):
    """What the duties use of the kernel."""

    home: Home
    boot_id: str
    config: Config
    journal: Store
    audit: AuditLog
    owner: OwnerChannel
    hooks: Hooks
    bus_bell: BusBell
    locks: LockManager
    learner: Learner
    scheduler: Scheduler
    answering: Answering

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None: ...


class Duties:
    def __init__(
        self,
        host: DutiesHost,
        *,
        sandbox_home: str,
        sandbox_running: Callable[[str], bool],
    ) -> None:
        self._k = host
        self._sandbox_home = sandbox_home
        self._sandbox_running = sandbox_running
        self.tasks: list[asyncio.Task[None]] = []
        self.disk: disk.DiskWatch | None = None  # the home's free space (kernel/disk.py)
        self._disk_warnings = 0

    def watch_disk(self, config: Config) -> None:
        home = self._k.home
        self.disk = disk.DiskWatch(
            home.root,
            home.vault_dir / disk.RESERVE_NAME,
            config.vault.low_space_mb * disk.MB,
            config.vault.reserve_mb * disk.MB,
        )

    @property
    def disk_watch(self) -> disk.DiskWatch:
        assert self.disk is not None, "set by start()"
        return self.disk

    def start(
        self, schedule_plans: list[Due], on_ended: Callable[[asyncio.Task[None]], None]
    ) -> None:
        k = self._k
        config = k.config  # the leases keep the length they started with
        scheduler = k.scheduler
        duties: dict[str, Callable[[bool], Awaitable[None]]] = {
            "pfar-owner": lambda again: k.owner.run(),
            "pfar-expiry": lambda again: self._expiry_loop(),
            "pfar-cleanup": lambda again: self._cleanup_loop(),
            "pfar-sandboxes": lambda again: self._sandbox_loop(),
            "pfar-disk": lambda again: self._disk_loop(),
            # started again (after running out of descriptors), it plans afresh
            "pfar-schedules": lambda again: scheduler.run(None if again else schedule_plans),
            "pfar-hooks": lambda again: hook_feed.run(k.journal, k.hooks, k.bus_bell),
            "pfar-leases": lambda again: self._lease_loop(config),
            # learnings a dying kernel left undecided or unstored (kernel/learning.py)
            "pfar-learnings": lambda again: k.learner.run(),
            # tasks a day's or month's spend cap held, let go when it lifts
            "pfar-spend-holds": lambda again: spend_holds.run(k),
        }
        schedule = BackupSchedule.of(k.home, config.vault.backup)
        if schedule is not None:  # [vault.backup] (kernel/backups.py)
            duties["pfar-backup"] = lambda again: ScheduledBackups(k, schedule).run()
        # a duty that runs out of file descriptors (a flooded listener) waits and goes
        # on; any other end of a duty stops the kernel (on_ended)
        self.tasks = [
            asyncio.create_task(descriptors.kept(name, start), name=name)
            for name, start in duties.items()
        ]
        for bg in self.tasks:
            bg.add_done_callback(on_ended)

    async def stop(self) -> None:
        for bg in self.tasks:
            bg.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def expire(self) -> None:
        """Fail the tasks whose approval or credential prompt ran out of time."""
        k = self._k
        now = now_rfc3339()
        deadline = await k.journal.questions.next_deadline()
        if deadline is None or deadline > now:
            return
        expired = await k.journal.questions.expire_due(now)
        failed = [(task_id, error) for task_id, error in expired if error is not None]
        for task_id, error in expired:
            if error is None:  # a permission left unanswered: a "No", and the task goes on
                k.audit.log("permission_expired", task_id=task_id)
                k.advance(task_id)
        for task_id, error in failed:
            k.audit.log("task_expired", task_id=task_id, error=error)
        if failed:
            await k.journal.events.enqueue(
                [
                    OwnerMessage(
                        FailedKey(task_id),
                        MessageKind.notice,
                        f"Task {task_id[:8]} failed: {error}",
                        task_id,
                    )
                    for task_id, error in failed
                ]
            )
            k.owner.notify()

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._k.audit.flush(sync=False)
            await self.expire()

    async def cleanup(self) -> int:
        k = self._k
        r = k.config.recovery
        now = datetime.now(UTC)
        completed_before = rfc3339(now - timedelta(hours=r.journal_retention_completed_hours))
        failed_before = rfc3339(now - timedelta(days=r.journal_retention_failed_days))
        # in bounded batches, each its own commit: a long history never holds the writer
        removed = pruned = 0
        while True:
            n = await k.journal.tasks.cleanup(completed_before, failed_before, CLEANUP_BATCH)
            removed += n
            if n < CLEANUP_BATCH:
                break
        while True:  # delivered chat messages go with the owner's, after the longer retention
            n = await k.journal.events.prune(failed_before, KEEP_BOOTS, CLEANUP_BATCH)
            pruned += n
            if n < CLEANUP_BATCH:
                break
        if removed or pruned:
            k.audit.log("journal_cleanup", removed=removed, pruned=pruned)
        return removed

    async def _cleanup_loop(self) -> None:
        while True:
            await asyncio.sleep(self._k.config.journal.cleanup_interval_hours * 3600)
            await self.cleanup()

    async def _sandbox_loop(self) -> None:
        """R7: every 30 s, a sandbox whose task is not running on this kernel is killed."""
        k = self._k
        while True:
            await asyncio.sleep(SANDBOX_RECONCILE_SECONDS)
            killed = sandbox.reconcile(self._sandbox_home, self._sandbox_running)
            if killed:
                log.warning("killed %d orphaned sandbox(es)", killed)
                k.audit.log("orphan_sandboxes_killed", count=killed)
            # a task that ended with no coroutine of this kernel (a question that lapsed)
            ended = await task_processes.end_processes(k.journal, task_processes.terminal)
            if ended:
                k.audit.log("task_processes_ended", count=ended, at="reconcile")

    async def _disk_loop(self) -> None:
        while True:
            await asyncio.sleep(disk.CHECK_SECONDS)
            await self.check_disk()

    async def check_disk(self) -> None:
        """Tell the owner, once a crossing, that the home's disk is nearly full."""
        k = self._k
        watch = self.disk_watch
        try:
            free = watch.crossed()
        except OSError as exc:  # a duty that stops would stop the kernel: this is a warning
            log.warning("cannot read the free space of %s: %s", k.home.root, exc)
            return
        if free is None:
            return
        text = disk.low_space_message(k.home.root, free, watch.low_bytes)
        log.warning("%s", text)
        k.audit.log("disk_low", free_mb=free // disk.MB)
        self._disk_warnings += 1
        key = DiskLowKey(k.boot_id, self._disk_warnings)
        await k.journal.events.enqueue([OwnerMessage(key, MessageKind.notice, text, None)])
        k.owner.notify()

    async def _lease_loop(self, config: Config) -> None:
        """Renew this kernel's lock leases every third of their length."""
        lease = config.scheduler.lock_lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            if self._k.locks.holding():  # an idle kernel writes nothing
                await self._k.journal.locks.renew(self._k.boot_id, lease)
