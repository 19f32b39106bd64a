"""The kernel's life: whether it takes work, what it holds while it runs (the home's
lock, Python's collector), and how it ends. A graceful shutdown (spec §9) waits for
the running tasks, delivers the owner's messages and closes every store; an abort
(tests, fail-stop) closes them as they are; and the kernel stops itself when a vault
write fails (kernel/fail_stop.py) or a duty that should run for its life ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from ..config import Config
from ..errors import PfarError, VaultIOError
from ..journal.store import Store
from ..vault import knowledge
from ..vault.home import Home, HomeLock
from ..vault.secrets import SecretStore
from . import collector, disk, task_processes
from .acknowledging import Acknowledging
from .audit import AuditLog
from .bus_bell import BusBell
from .driver import TaskDriver
from .duties import Duties
from .owner import OwnerChannel
from .sessions import SessionSupervisor

if TYPE_CHECKING:
    from ..tools.mcp.servers import McpServers

log = logging.getLogger("pfar.kernel")


class Life:
    def __init__(self, home: Home) -> None:
        self.accepting = False  # False from a shutdown's start (or a stop) on
        self.stopped = asyncio.Event()
        self.failure: str | None = None  # why the kernel stopped itself, if it did
        self.fail_stopped: BaseException | None = None  # a vault write failed
        self._lock = HomeLock(home)
        self._holds_collector = False  # start() set Python's collector for a kernel

    def take_home(self) -> None:
        self._lock.acquire()

    def hold_collector(self) -> None:
        collector.hold()  # what it loaded lives as long as it runs (kernel/collector.py)
        self._holds_collector = True

    def let_go(self) -> None:
        """Give back the home's lock, and the collector if it was held."""
        self._lock.release()
        if self._holds_collector:
            self._holds_collector = False
            collector.give_back()

    def fail_stop(
        self, exc: BaseException, *, journal_failed: bool, release_reserve: Callable[[], bool]
    ) -> None:
        """A write to the vault failed: stop taking work, and have the process stop
        without the graceful steps, which would write."""
        if self.fail_stopped is not None:
            return  # said once: every task that meets the stopped writer comes here too
        self.fail_stopped = exc
        what = "journal write" if journal_failed else "write"
        log.critical("%s failed; stopping the kernel: %s", what, exc)
        # room for what the stop and the next start still write (kernel/disk.py)
        if release_reserve():
            log.critical("released the journal's reserve (vault/%s)", disk.RESERVE_NAME)
        self.accepting = False
        self.stopped.set()

    def duty_ended(
        self, task: asyncio.Task[None], fail_stop: Callable[[BaseException], None]
    ) -> None:
        """A duty that should run for the kernel's life ended: stop loudly, not limp on."""
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, VaultIOError):  # owner.log on a disk that failed, say
            fail_stop(exc)
            return
        log.critical("kernel duty %s stopped: %r; stopping the kernel", task.get_name(), exc)
        self.failure = f"{task.get_name()} stopped: {exc!r}"
        self.accepting = False
        self.stopped.set()


class Stopping(Protocol):
    """What a shutdown or an abort closes of the kernel."""

    boot_id: str
    config: Config
    journal: Store
    audit: AuditLog
    owner: OwnerChannel
    sessions: SessionSupervisor
    secrets: SecretStore
    knowledge: knowledge.KnowledgeStore | None
    acknowledged: Acknowledging | None
    bus_bell: BusBell
    before_close: list[Callable[[], Awaitable[None]]]
    stop_now: asyncio.Event
    mcp: McpServers | None

    @property
    def life(self) -> Life: ...

    @property
    def driver(self) -> TaskDriver: ...

    @property
    def duties(self) -> Duties: ...


async def shutdown(k: Stopping, timeout: float | None) -> list[str]:
    """Graceful shutdown (spec §9). Returns the ids of tasks left in the journal."""
    k.life.accepting = False
    if timeout is None:
        timeout = k.config.recovery.shutdown_timeout_seconds
    still = await k.driver.wait_running(timeout, k.stop_now)
    left = [t.get_name().removeprefix("task-") for t in still]
    for t in still:
        t.cancel()
    if still:
        await asyncio.gather(*still, return_exceptions=True)
        k.audit.log("shutdown_timeout", pending_tasks=len(left))
    try:
        await k.owner.deliver_pending()
    except (PfarError, OSError) as exc:  # they stay in the outbox for the next start
        log.error("owner messages not delivered at shutdown: %s", exc)
    for step in k.before_close:
        try:
            await step()
        except Exception:
            log.exception("a shutdown step failed; the journal is closed all the same")
    await k.sessions.close()
    if k.mcp is not None:  # after the tasks: no call of theirs is in flight
        await k.mcp.close()
    await k.duties.stop()
    await k.driver.processes_ended()
    # no kernel supervises what tasks' commands left running: the next start resumes
    # their tasks, not those processes
    ended = await task_processes.end_processes(k.journal, task_processes.any_state)
    if ended:
        k.audit.log("task_processes_ended", count=ended, at="shutdown")
    await k.journal.events.end_boot(k.boot_id)
    k.audit.log("system_shutdown", left_in_journal=left)
    k.audit.close()
    k.bus_bell.close()  # live views of the bus end before the journal closes
    await k.journal.aclose(checkpoint=True)
    if k.acknowledged is not None:
        k.acknowledged.close()
    k.secrets.close()
    k.duties.disk_watch.release()  # a stopped kernel holds no space it does not use
    _close_knowledge(k)
    k.life.let_go()
    k.life.stopped.set()
    return left


async def abort(k: Stopping) -> None:
    """Stop without the graceful steps (tests and fail-stop): the journal is as it is."""
    k.life.accepting = False
    coroutines = [*k.driver.coroutines(), *k.duties.tasks]
    for t in coroutines:
        t.cancel()
    await asyncio.gather(*coroutines, return_exceptions=True)
    if k.mcp is not None:
        await k.mcp.close()
    k.bus_bell.close()
    await k.journal.aclose(checkpoint=False)
    if k.acknowledged is not None:
        k.acknowledged.abandon()
    k.secrets.close()
    if k.duties.disk is not None:
        k.duties.disk.release()
    _close_knowledge(k)
    k.life.let_go()


def _close_knowledge(k: Stopping) -> None:
    if k.knowledge is not None:
        k.knowledge.close()
        k.knowledge = None
