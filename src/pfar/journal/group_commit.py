"""What a group commit does inside its transaction, written once for every backend.

A batch is every journal write waiting at a moment: it begins one transaction, runs
each write (an operation: the family's SQL on a `Tx`), and commits. One refused
operation (an illegal move, a constraint) does not undo its neighbours: a batch in
which one is refused is run again with each operation under its own savepoint. An I/O
error, a damaged page or a lost connection stops the writer for good (fail-stop):
after a failed fsync the data may be gone, so only a restart that recovers from what
is really stored is safe. The schedule (when a batch is run, and on which thread or
task) is the backend's writer's; this module is what its transaction holds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import PfarError, VaultCorrupt, VaultIOError, WriteRefused
from .dialect import Failure
from .faults import FaultHook
from .tx import GuardMissed, Tx

T = TypeVar("T")
Op = Callable[[Tx], T]
Outcome = tuple[bool, Any]  # (True, the op's value) or (False, the error that refused it)


class CommitWatcher(Protocol):
    """Told of each commit (the kernel keeps vault/acknowledged up with the journal).
    Neither call may raise: the commit is the journal's, the watcher only looks on."""

    def inside(self, tx: Tx) -> None:
        """In the transaction, just before its COMMIT: read what the commit will make
        durable (pages the transaction touched are in cache: cheaper than after)."""

    def committed(self) -> None:
        """The COMMIT is durable; called before any waiter is told so."""


class StoreWriter(Protocol):
    """A store's group-commit writer, as its kernel sees it (journal/backing.py's
    `Writer` adds how a family queues its writes)."""

    # told once when a commit fails: the owner of the writer must stop (fail-stop)
    on_failure: Callable[[BaseException], None] | None
    # whether a write now would have no company in its commit (one task running)
    alone: Callable[[], bool] | None
    # told of each commit (the kernel keeps vault/acknowledged up with a SQLite journal)
    watcher: CommitWatcher | None
    commits: int
    writes: int

    # the error that stopped the writer (fail-stop), None while it writes
    @property
    def failure(self) -> BaseException | None: ...


@dataclass(slots=True)
class Job(Generic[T]):
    op: Op[T]
    points: tuple[str, ...]
    future: asyncio.Future[T] | None


class Stopped(Exception):
    """The commit failed in a way that stops the writer; `cause` says how."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class RolledBack(Exception):
    """The batch's one write was refused: its transaction was rolled back, nothing of it
    committed (`outcome` is the refusal)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(str(outcome[1]))
        self.outcome = outcome


class Busy(Exception):
    """No transaction could begin (another connection holds the write lock): nothing
    was written."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def commit(
    tx: Tx, batch: list[Job[Any]], watcher: CommitWatcher | None, *, busy_refuses: bool
) -> list[Outcome]:
    """Run `batch` in one transaction on `tx` and commit it; each job's outcome.

    Raises `Stopped` when the writer must stop (the transaction was rolled back where
    that was still possible), `RolledBack` when a batch of one was refused, and `Busy`
    when the transaction could not begin and `busy_refuses` (a store opened outside a
    kernel) says to refuse rather than stop.

    A backend may send statements ahead of their results (`Tx.settle`): an operation's
    error then surfaces where a later statement's result is read, so the batch settles
    before it is released and each operation run on its own settles before its
    savepoint is let go, and no refusal is ever put on a neighbour."""
    try:
        try:
            for statement in tx.dialect.begin:
                tx.execute(statement)
        except Exception as exc:
            if busy_refuses and tx.dialect.failure(exc) is Failure.BUSY:
                raise Busy(exc) from exc
            raise
        if len(batch) == 1:
            # alone in its transaction: a refused operation is undone by undoing the
            # transaction, so it needs no savepoint of its own (two statements fewer
            # on every commit of a task running alone)
            outcome = _attempt(tx, _settled(batch[0]))
            if not outcome[0]:
                _drain(tx)
                tx.execute("ROLLBACK")
                tx.settle()
                raise RolledBack(outcome)
            outcomes = [outcome]
        else:
            # one savepoint for the batch, not one per write; the transaction (and
            # the write lock) is kept when the batch has to run again
            tx.execute("SAVEPOINT batch")
            tried = _run_all(tx, batch)
            if tried is None:  # an operation was refused: again, each on its own
                _drain(tx)
                tx.execute("ROLLBACK TO batch")
                tried = _run_each(tx, batch)
            tx.execute("RELEASE batch")
            outcomes = tried
        if watcher is not None:
            watcher.inside(tx)
        tx.execute("COMMIT")
        tx.settle()
    except (Busy, RolledBack):
        raise
    except BaseException as exc:
        with contextlib.suppress(Exception):
            tx.execute("ROLLBACK")
            tx.settle()
        raise Stopped(exc) from exc
    return outcomes


def _run_all(tx: Tx, batch: list[Job[Any]]) -> list[Outcome] | None:
    """Every operation of the batch, as if none could be refused (nearly none is): a
    savepoint around each costs two statements per write. None when one was; the
    caller rolls the batch back and runs it again with `_run_each`. An operation is
    SQL on the transaction it is given, so running it again after the rollback does
    what it would have done the first time."""
    outcomes: list[Outcome] = []
    # a guard that nearly always holds may be checked when the batch settles, not as
    # each write is sent (Tx.matched): a miss runs the batch again like a refusal
    with tx.optimistic():
        for job in batch:
            outcome = _attempt(tx, job.op)
            if not outcome[0]:
                return None
            outcomes.append(outcome)
        if not _attempt(tx, _settle)[0]:  # one refused or a guard missed, unread till now
            return None
    return outcomes


def _run_each(tx: Tx, batch: list[Job[Any]]) -> list[Outcome]:
    """Each operation under its own savepoint: one refused (an illegal transition)
    undoes only itself, never its neighbours in the batch."""
    outcomes: list[Outcome] = []
    for job in batch:
        tx.execute("SAVEPOINT op")
        outcome = _attempt(tx, _settled(job))
        if outcome[0]:
            tx.execute("RELEASE op")
        else:
            _drain(tx)
            tx.execute("ROLLBACK TO op")
            tx.execute("RELEASE op")
        outcomes.append(outcome)
    return outcomes


def _settle(tx: Tx) -> None:
    tx.settle()


def _drain(tx: Tx) -> None:
    """After a refusal: what was sent after the refused statement is settled (a server
    skips it, and takes nothing more until told so), its errors already told. A lost
    connection is raised: the writer stops."""
    _attempt(tx, _settle)


def _settled(job: Job[T]) -> Op[T]:
    """`job`'s operation, done only once every statement it sent has run."""

    def run(tx: Tx) -> T:
        value = job.op(tx)
        tx.settle()
        return value

    return run


def _attempt(tx: Tx, op: Op[Any]) -> Outcome:
    """One operation's outcome: its value, or the error that refused it. An I/O error,
    a damaged page or a lost connection is raised instead: the writer stops."""
    try:
        return True, op(tx)
    except GuardMissed as exc:  # optimistic only: the batch runs again, each on its own
        return False, exc
    except (VaultCorrupt, VaultIOError):
        raise  # a damaged page (writing on could spread it), a full or failing disk
    except PfarError as exc:
        return False, exc
    except Exception as exc:
        failure = tx.dialect.failure(exc)
        if failure is Failure.STOP:
            raise
        if failure is None:
            return False, exc  # not the driver's: a bug in the operation, told as it is
        # the driver's own error never leaves the journal
        refused = WriteRefused(f"the journal refused a write: {exc}")
        refused.__cause__ = exc
        return False, refused


def stopped_error(cause: BaseException) -> VaultIOError:
    return VaultIOError(f"journal commit failed, the kernel must stop: {cause}")


def pass_points(faults: FaultHook, batch: list[Job[Any]], outcomes: list[Outcome]) -> None:
    """The committed writes' fault points, before any waiter is released: nothing runs
    past a point a test kills the process at."""
    for job, (ok, _) in zip(batch, outcomes, strict=True):
        if ok:
            for point in job.points:
                faults.passed(point)


def committed(
    batch: list[Job[Any]],
    outcomes: list[Outcome],
    watcher: CommitWatcher | None,
    faults: FaultHook,
) -> None:
    """After a batch's COMMIT: the watcher is told, the fault points are passed, then
    the waiters are released (in that order: nothing runs past a point a test kills
    the process at)."""
    if watcher is not None:
        watcher.committed()
    if faults.armed:
        pass_points(faults, batch, outcomes)
    resolve(batch, outcomes)


def resolve(batch: list[Job[Any]], outcomes: list[Outcome]) -> None:
    for job, (ok, value) in zip(batch, outcomes, strict=True):
        fut = job.future
        if fut is None or fut.done():  # a cancelled waiter: the write still happened
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def fail_all(batch: list[Job[Any]], err: BaseException) -> None:
    for job in batch:
        if job.future is not None and not job.future.done():
            job.future.set_exception(err)


def points(point: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if point is None:
        return ()
    return (point,) if isinstance(point, str) else point
