"""PostgreSQL's group commit: the writes waiting while a commit is on its way go in the next.

One connection is the writer's. A write is queued; when no commit is running, one
starts as a task of the event loop, and every write queued while it waits on the
server rides on the commit after it, so throughput grows with concurrency as it does
on SQLite. What the transaction holds is `group_commit.py`'s, run through the bridge:
each statement awaits the server, and the event loop goes on meanwhile. A lost
connection or a server gone stops the writer for good (fail-stop), as a failed fsync
does on SQLite: the kernel stops, and its next start recovers from what the server
committed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection

from ...errors import StoreUnavailable, VaultIOError
from .. import group_commit
from ..faults import FaultHook
from ..group_commit import CommitWatcher, Job, Op, Outcome, RolledBack, Stopped
from .bridge import run_sync
from .connection import PostgresTx

T = TypeVar("T")


class PostgresWriter:
    def __init__(
        self, conn: AsyncConnection[Any], where: str, *, fault_hook: FaultHook | None = None
    ) -> None:
        # made on the loop the journal was opened on: its commits run there
        self._loop = asyncio.get_running_loop()
        self._conn = conn
        # the connection stays in pipeline mode from the first commit to the writer's
        # close: leaving it sends a round trip of its own
        self._tx: PostgresTx | None = None
        self._pipeline_mode = contextlib.AsyncExitStack()
        self._where = where
        self._faults = fault_hook or FaultHook(None)
        self.on_failure: Callable[[BaseException], None] | None = None
        self.alone: Callable[[], bool] | None = None  # no commit can be made inside a call
        self.watcher: CommitWatcher | None = None
        self._pending: list[Job[Any]] = []
        self._running: asyncio.Task[None] | None = None
        self._deferred_timer: asyncio.TimerHandle | None = None
        self._failed: BaseException | None = None
        self._closed = False
        self.commits = 0
        self.writes = 0

    @property
    def failure(self) -> BaseException | None:
        return self._failed

    def submit(self, op: Op[T], point: str | tuple[str, ...] | None = None) -> asyncio.Future[T]:
        """Queue `op`; the future resolves once it is committed."""
        fut: asyncio.Future[T] = self._loop.create_future()
        if self._failed is not None or self._closed:
            fut.set_exception(self._refusal())
            return fut
        self._pending.append(Job(op, group_commit.points(point), fut))
        self._start()
        return fut

    def defer(
        self, op: Op[Any], point: str | tuple[str, ...] | None = None, *, within: float = 0.05
    ) -> None:
        """Queue `op` to ride on the next commit, or one `within` seconds from now."""
        if self._failed is not None or self._closed:
            return
        self._pending.append(Job(op, group_commit.points(point), None))
        if self._running is None and self._deferred_timer is None:
            self._deferred_timer = self._loop.call_later(within, self._start)

    def _start(self) -> None:
        if self._deferred_timer is not None:
            self._deferred_timer.cancel()
            self._deferred_timer = None
        if self._running is None and self._pending:
            self._running = self._loop.create_task(self._commit_all())

    async def _commit_all(self) -> None:
        try:
            while self._pending and self._failed is None:
                batch, self._pending = self._pending, []
                await self._commit(batch)
        finally:
            self._running = None
        if self._pending:  # queued after the writer stopped
            group_commit.fail_all(self._pending, self._refusal())
            self._pending = []

    async def _pipelined(self) -> PostgresTx:
        if self._tx is None:
            pipeline = await self._pipeline_mode.enter_async_context(self._conn.pipeline())
            self._tx = PostgresTx(self._conn, pipeline)
        return self._tx

    async def _commit(self, batch: list[Job[Any]]) -> None:
        try:
            outcomes: list[Outcome] = await run_sync(
                group_commit.commit,
                await self._pipelined(),
                batch,
                self.watcher,
                busy_refuses=False,
            )
        except RolledBack as refused:
            group_commit.resolve(batch, [refused.outcome])
            return
        except Stopped as stopped:
            self._stop(stopped.cause, batch)
            return
        except BaseException as exc:  # cancelled mid-commit (a shutdown): the outcome is
            self._stop(exc, batch)  # unknown, so the writer stops and no caller hangs
            raise
        self.commits += 1
        self.writes += len(batch)
        group_commit.committed(batch, outcomes, self.watcher, self._faults)

    def _stop(self, cause: BaseException, batch: list[Job[Any]]) -> None:
        self._failed = cause
        # the kernel's fail-stop is told with the server named: the driver's error alone
        # would be said as if it were the home's SQLite file's. libpq's message runs on
        # several lines; the owner reads it as one
        err = StoreUnavailable(
            f"journal commit on {self._where} failed, the kernel must stop: "
            f"{' '.join(str(cause).split()) or type(cause).__name__}"
        )
        if self.on_failure is not None:
            self.on_failure(err)
        group_commit.fail_all(batch, err)

    def _refusal(self) -> VaultIOError:
        if self._failed is not None:
            return StoreUnavailable(f"the journal writer stopped: {self._failed}")
        return VaultIOError("the journal writer is closed")

    async def close(self) -> None:
        """Refuse further writes, then commit what is queued (the deferred ones too)."""
        self._closed = True
        self._start()
        while self._running is not None:
            await asyncio.shield(self._running)
        # a writer stopped by a lost connection has nothing left to settle
        with contextlib.suppress(psycopg.Error):
            await self._pipeline_mode.aclose()
