"""SQLite's group commit: every journal write waiting at a moment is committed in one transaction.

The writer lives on the kernel's event loop. A write is queued and a flush is
scheduled with `call_soon`, so the flush runs after every task that is ready
in this turn of the loop has queued its own write: 64 tasks stepping at once
share one commit and one fsync. What the transaction holds
is `group_commit.py`'s, the same on every backend. A caller's write is durable
when its future resolves.

A write that would have no company in its commit (the writer's owner says so:
the kernel, when one task runs) commits at once, inside `submit`: with one
task, waiting a turn of the loop for company that cannot come, and another
turn to wake the task, cost more than the Python of its step.

Committing on the loop's own thread, rather than handing writes to a writer
thread, avoids two thread wake-ups and the GIL hand-off per commit, which cost
more than the fsync itself; the loop is blocked for one commit at a time, and
every task that would run meanwhile is waiting on that commit anyway.

An I/O error on commit, or a damaged page met by a write, stops the writer for
good (fail-stop): after a failed fsync the OS may have dropped the data, so the
only safe continuation is a restart that recovers from what is really on disk.
A writer made with `stop_when_busy=False` (a store opened on its own, outside a
kernel) instead refuses a batch whose transaction cannot begin because another
connection holds the write lock past the busy timeout: nothing was written, so
the writer goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import VaultIOError, WriteRefused
from .. import group_commit
from ..faults import FaultHook
from ..group_commit import Busy, CommitWatcher, Job, Op, Outcome, RolledBack, Stopped
from .connection import JournalConnection

T = TypeVar("T")

_AT_ONCE_IN_A_ROW = 16

__all__ = ["CommitWatcher", "GroupCommitWriter", "Op"]


class GroupCommitWriter:
    def __init__(
        self,
        conn: JournalConnection,
        *,
        fault_hook: FaultHook | None = None,
        stop_when_busy: bool = True,
    ) -> None:
        self._conn = conn
        self._faults = fault_hook or FaultHook(None)
        self._stop_when_busy = stop_when_busy
        # told once when a commit fails: the owner of the writer must stop (fail-stop)
        self.on_failure: Callable[[BaseException], None] | None = None
        self._pending: list[Job[Any]] = []
        self._scheduled = False
        self._deferred_timer: asyncio.TimerHandle | None = None
        self._failed: BaseException | None = None
        self._closed = False
        # Whether a write now would have no company in its commit (the owner of the
        # writer knows: one task running, say). Such a write commits at once, inside
        # `submit`: its caller goes on without a turn of the loop to flush and another
        # to wake it. At most `_AT_ONCE_IN_A_ROW` such commits between two turns of the
        # loop, so a task whose steps never wait cannot keep the loop from the rest.
        self.alone: Callable[[], bool] | None = None
        self.watcher: CommitWatcher | None = None
        self._at_once = 0
        self.commits = 0
        self.writes = 0

    def submit(self, op: Op[T], point: str | tuple[str, ...] | None = None) -> asyncio.Future[T]:
        """Queue `op` on the running loop; the future resolves once it is committed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        if self._failed is not None:
            fut.set_exception(VaultIOError(f"the journal writer stopped: {self._failed}"))
            return fut
        if self._closed:
            fut.set_exception(VaultIOError("the journal writer is closed"))
            return fut
        job = Job(op, group_commit.points(point), fut)
        if (
            self.alone is not None
            and not self._scheduled  # no flush is due: what waits was deferred, if any
            and self._at_once < _AT_ONCE_IN_A_ROW
            and self.alone()
        ):
            if self._at_once == 0:
                loop.call_soon(self._next_turn)
            self._at_once += 1
            # deferred writes ride on it, as they would on any commit
            batch, self._pending = [*self._pending, job], []
            if self._deferred_timer is not None:
                self._deferred_timer.cancel()
                self._deferred_timer = None
            with contextlib.suppress(VaultIOError):  # a failed commit: `fut` carries it
                self._commit(batch)  # resolves `fut`: awaiting it does not yield
            return fut
        self._pending.append(job)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _next_turn(self) -> None:
        self._at_once = 0

    def defer(
        self, op: Op[Any], point: str | tuple[str, ...] | None = None, *, within: float = 0.05
    ) -> None:
        """Queue `op` to ride on the next commit, or one `within` seconds from now.

        For writes nobody waits on and that are safe to lose in a crash (marking
        an owner message delivered: the owner log's keys catch a resend).
        """
        if self._failed is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to ride on: commit it now
            self.run(op, point)
            return
        self._pending.append(Job(op, group_commit.points(point), None))
        if not self._scheduled and self._deferred_timer is None:
            self._deferred_timer = loop.call_later(within, self._flush)

    def run(self, op: Op[T], point: str | tuple[str, ...] | None = None) -> T:
        """Commit `op` now, alone (for callers outside an event loop)."""
        if self._failed is not None:
            raise VaultIOError(f"the journal writer stopped: {self._failed}")
        if self._closed:
            raise VaultIOError("the journal writer is closed")
        ok, value = self._commit([Job(op, group_commit.points(point), None)])[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    @property
    def failure(self) -> BaseException | None:
        return self._failed

    def close(self) -> None:
        """Commit what is queued, then refuse further writes."""
        if self._pending and self._failed is None:
            self._flush()
        self._closed = True

    def _flush(self) -> None:
        self._scheduled = False
        if self._deferred_timer is not None:
            self._deferred_timer.cancel()
            self._deferred_timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        if self._failed is not None:
            group_commit.fail_all(
                batch, VaultIOError(f"the journal writer stopped: {self._failed}")
            )
            return
        self._commit(batch)

    def _commit(self, batch: list[Job[Any]]) -> list[Outcome]:
        try:
            outcomes = group_commit.commit(
                self._conn, batch, self.watcher, busy_refuses=not self._stop_when_busy
            )
        except Busy as busy:  # no transaction began: nothing written, the writer goes on
            refused = WriteRefused(
                f"another connection holds the journal's write lock ({busy.cause}); "
                "nothing was written"
            )
            outcomes = [(False, refused)] * len(batch)
            group_commit.resolve(batch, outcomes)
            return outcomes
        except RolledBack as refused:  # a batch of one, refused: nothing was committed
            group_commit.resolve(batch, [refused.outcome])
            return [refused.outcome]
        except Stopped as stopped:
            exc = stopped.cause
            self._failed = exc
            if self.on_failure is not None:
                self.on_failure(exc)
            err = group_commit.stopped_error(exc)
            group_commit.fail_all(batch, err)
            if batch[0].future is None:
                raise err from exc
            return [(False, err)] * len(batch)
        self.commits += 1
        self.writes += len(batch)
        group_commit.committed(batch, outcomes, self.watcher, self._faults)
        return outcomes
