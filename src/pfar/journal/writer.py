"""Group commit: every journal write waiting at a moment is committed in one transaction.

The writer lives on the kernel's event loop. A write is queued and a flush is
scheduled with `call_soon`, so the flush runs after every task that is ready
in this turn of the loop has queued its own write: 64 tasks stepping at once
share one commit and one fsync. One refused operation (an illegal
transition) does not undo its neighbours: a batch in which one is refused is
run again with each operation under its own savepoint. A caller's write is
durable when its future resolves.

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
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import VaultCorrupt, VaultIOError, VaultUnwritable
from ..vault.driver import sqlite
from .faults import FaultHook

T = TypeVar("T")
Op = Callable[[sqlite.Connection], T]

_AT_ONCE_IN_A_ROW = 16


class CommitWatcher(Protocol):
    """Told of each commit (the kernel keeps vault/acknowledged up with the journal).
    Neither call may raise: the commit is the journal's, the watcher only looks on."""

    def inside(self, conn: sqlite.Connection) -> None:
        """In the transaction, just before its COMMIT: read what the commit will make
        durable (pages the transaction touched are in cache: cheaper than after)."""

    def committed(self) -> None:
        """The COMMIT is durable; called before any waiter is told so."""


@dataclass(slots=True)
class _Job(Generic[T]):
    op: Op[T]
    points: tuple[str, ...]
    future: asyncio.Future[T] | None


class GroupCommitWriter:
    def __init__(
        self,
        conn: sqlite.Connection,
        *,
        fault_hook: FaultHook | None = None,
        stop_when_busy: bool = True,
    ) -> None:
        self._conn = conn
        self._faults = fault_hook or FaultHook(None)
        self._stop_when_busy = stop_when_busy
        # told once when a commit fails: the owner of the writer must stop (fail-stop)
        self.on_failure: Callable[[BaseException], None] | None = None
        self._pending: list[_Job[Any]] = []
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
        job = _Job(op, _points(point), fut)
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
        self._pending.append(_Job(op, _points(point), None))
        if not self._scheduled and self._deferred_timer is None:
            self._deferred_timer = loop.call_later(within, self._flush)

    def run(self, op: Op[T], point: str | tuple[str, ...] | None = None) -> T:
        """Commit `op` now, alone (for callers outside an event loop)."""
        if self._failed is not None:
            raise VaultIOError(f"the journal writer stopped: {self._failed}")
        if self._closed:
            raise VaultIOError("the journal writer is closed")
        results = self._commit([_Job(op, _points(point), None)])
        ok, value = results[0]
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
            err = VaultIOError(f"the journal writer stopped: {self._failed}")
            for job in batch:
                if job.future is not None and not job.future.done():
                    job.future.set_exception(err)
            return
        self._commit(batch)

    def _commit(self, batch: list[_Job[Any]]) -> list[tuple[bool, Any]]:
        conn = self._conn
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite.OperationalError as exc:
                if self._stop_when_busy or not _is_busy(exc):
                    raise
                return self._refuse(batch, exc)  # no transaction began: nothing written
            if len(batch) == 1:
                # alone in its transaction: a refused operation is undone by undoing the
                # transaction, so it needs no savepoint of its own (two statements fewer
                # on every commit of a task running alone)
                outcome = self._attempt(batch[0])
                if not outcome[0]:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    return self._refuse(batch, outcome[1])
                outcomes = [outcome]
            else:
                # one savepoint for the batch, not one per write; the transaction (and
                # the write lock) is kept when the batch has to run again
                conn.execute("SAVEPOINT batch")
                tried = self._run_all(batch)
                if tried is None:  # an operation was refused: again, each on its own
                    conn.execute("ROLLBACK TO batch")
                    tried = self._run_each(batch)
                conn.execute("RELEASE batch")
                outcomes = tried
            if self.watcher is not None:
                self.watcher.inside(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._failed = exc
            if self.on_failure is not None:
                self.on_failure(exc)
            with contextlib.suppress(sqlite.Error):
                conn.execute("ROLLBACK")
            err = VaultIOError(f"journal commit failed, the kernel must stop: {exc}")
            for job in batch:
                if job.future is not None and not job.future.done():
                    job.future.set_exception(err)
            if batch[0].future is None:
                raise err from exc
            return [(False, err)] * len(batch)
        self.commits += 1
        self.writes += len(batch)
        if self.watcher is not None:
            self.watcher.committed()
        if self._faults.armed:  # before any waiter is released: nothing runs past the point
            for job, (ok, _) in zip(batch, outcomes, strict=True):
                if ok:
                    for point in job.points:
                        self._faults.passed(point)
        self._resolve(batch, outcomes)
        return outcomes

    def _run_all(self, batch: list[_Job[Any]]) -> list[tuple[bool, Any]] | None:
        """Every operation of the batch, as if none could be refused (nearly none is): a
        savepoint around each costs two statements per write. None when one was; the
        caller rolls the batch back and runs it again with `_run_each`. An operation is
        SQL on the connection it is given, so running it again after the rollback does
        what it would have done the first time."""
        outcomes: list[tuple[bool, Any]] = []
        for job in batch:
            outcome = self._attempt(job)
            if not outcome[0]:
                return None
            outcomes.append(outcome)
        return outcomes

    def _run_each(self, batch: list[_Job[Any]]) -> list[tuple[bool, Any]]:
        """Each operation under its own savepoint: one refused (an illegal transition)
        undoes only itself, never its neighbours in the batch."""
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        for job in batch:
            conn.execute("SAVEPOINT op")
            outcome = self._attempt(job)
            if outcome[0]:
                conn.execute("RELEASE op")
            else:
                _rollback_op(conn)
            outcomes.append(outcome)
        return outcomes

    def _attempt(self, job: _Job[Any]) -> tuple[bool, Any]:
        """One operation's outcome: its value, or the error that refused it. An I/O error
        or a damaged page is raised instead: the writer stops (fail-stop)."""
        try:
            return True, job.op(self._conn)
        except sqlite.OperationalError as exc:
            if _is_io_error(exc):
                raise
            return False, exc
        except VaultCorrupt:
            raise  # a damaged page: writing on could spread it
        except Exception as exc:
            return False, exc

    def _refuse(self, batch: list[_Job[Any]], exc: Exception) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = [(False, exc)] * len(batch)
        self._resolve(batch, outcomes)
        return outcomes

    @staticmethod
    def _resolve(batch: list[_Job[Any]], outcomes: list[tuple[bool, Any]]) -> None:
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            fut = job.future
            if fut is None or fut.done():  # a cancelled waiter: the write still happened
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


def _points(point: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if point is None:
        return ()
    return (point,) if isinstance(point, str) else point


def _rollback_op(conn: sqlite.Connection) -> None:
    conn.execute("ROLLBACK TO op")
    conn.execute("RELEASE op")


def _is_busy(exc: sqlite.OperationalError) -> bool:
    return (exc.sqlite_errorcode or 0) & 0xFF == sqlite.SQLITE_BUSY


def _is_io_error(exc: sqlite.OperationalError) -> bool:
    if isinstance(exc, VaultUnwritable):
        return True
    text = str(exc).lower()
    return "disk i/o" in text or "database or disk is full" in text or "readonly" in text
