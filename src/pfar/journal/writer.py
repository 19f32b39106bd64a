"""Group commit: one thread owns the write connection and commits many journal writes at once.

Callers hand in operations (functions of a connection); the writer runs every
operation waiting in its queue inside one transaction, each under its own
savepoint so that one refused operation does not undo its neighbours, then
commits once and resolves every caller's future. A caller's write is durable
when its future resolves. Throughput grows with concurrency: 64 tasks waiting
share one fsync.

An I/O error on commit stops the writer for good (fail-stop): after a failed
fsync the OS may have dropped the data, so the only safe continuation is a
restart that recovers from what is really on disk.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import VaultIOError
from .faults import FaultHook

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], T]

_MAX_BATCH = 4096


@dataclass(slots=True)
class _Job(Generic[T]):
    op: Op[T]
    point: str | None
    future: Future[T]


class GroupCommitWriter:
    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        fault_hook: FaultHook | None = None,
        window_us: int = 0,
        name: str = "pfar-journal-writer",
    ) -> None:
        self._conn = conn
        self._faults = fault_hook or FaultHook(None)
        self._window = window_us / 1e6
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._failed: BaseException | None = None
        self._closed = False
        self.commits = 0
        self.writes = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, op: Op[T], point: str | None = None) -> Future[T]:
        """Queue `op`; the future resolves once its transaction is committed."""
        fut: Future[T] = Future()
        if self._failed is not None:
            fut.set_exception(VaultIOError(f"the journal writer stopped: {self._failed}"))
            return fut
        if self._closed:
            fut.set_exception(VaultIOError("the journal writer is closed"))
            return fut
        self._queue.put(_Job(op, point, fut))
        return fut

    def run(self, op: Op[T], point: str | None = None) -> T:
        """Submit and wait (for synchronous callers)."""
        return self.submit(op, point).result()

    @property
    def failure(self) -> BaseException | None:
        return self._failed

    def close(self) -> None:
        """Commit what is queued, then stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch: list[_Job[Any]] = [first]
            if self._window:
                time.sleep(self._window)
            while len(batch) < _MAX_BATCH:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                batch.append(job)
            self._commit(batch)
            if self._failed is not None:
                self._drain_failed()
                return

    def _commit(self, batch: list[_Job[Any]]) -> None:
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                conn.execute("SAVEPOINT op")
                try:
                    value = job.op(conn)
                except sqlite3.OperationalError as exc:
                    if _is_io_error(exc):
                        raise
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    outcomes.append((False, exc))
                except Exception as exc:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    outcomes.append((False, exc))
                else:
                    conn.execute("RELEASE op")
                    outcomes.append((True, value))
            conn.execute("COMMIT")
        except BaseException as exc:
            self._failed = exc
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            err = VaultIOError(f"journal commit failed, the kernel must stop: {exc}")
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(err)
            return
        self.commits += 1
        self.writes += len(batch)
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)
        if self._faults.armed:
            for job, (ok, _) in zip(batch, outcomes, strict=True):
                if ok and job.point is not None:
                    self._faults.passed(job.point)

    def _drain_failed(self) -> None:
        err = VaultIOError(f"the journal writer stopped: {self._failed}")
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None and not job.future.done():
                job.future.set_exception(err)


def _is_io_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "disk i/o" in text or "database or disk is full" in text or "readonly" in text
