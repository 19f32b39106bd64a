"""The kernel: the process that owns a home, runs tasks, and answers the owner.

`Kernel` owns its parts and wires them; each part names what it uses of the kernel
in a small protocol:

- opening.py, task_services.py, recovering.py: the start's stages (stores, services,
  recovery); the Kernel runs them in order, then starts the duties and resumes tasks;
- driver.py: the coroutines that advance tasks;
- intake.py: events and tasks coming in; answering.py: the owner's answers;
- holds.py: cancel, pause, resume; duties.py: what runs beside the tasks;
- lifecycle.py: whether it takes work, and how it ends.

Use it from Python as

    async with open_kernel(home) as kernel:
        task = await kernel.submit("daily_digest", "what happened today?")
        await kernel.wait_idle()

`pfar run` is this plus the control socket and the CLI adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..answers import IN_PROCESS, Actor
from ..config import Config
from ..errors import ConfigError, ShuttingDown, UnknownSecret, VaultMissing
from ..hooks import NO_HOOKS
from ..journal import TaskKind, TaskRecord
from ..journal.faults import FaultHook
from ..journal.locks_sql import LockOwner
from ..journal.store import Store
from ..llm.proxy import ChatModel, InferenceProxy
from ..policy.redact import RedactingFilter, Redactor
from ..recovery import RecoveryReport
from ..runners import Services, TemplateRegistry
from ..tools import sandbox
from ..tools.processes import start_time
from ..tools.registry import ToolRegistry
from ..vault import keys, knowledge
from ..vault.home import Home
from ..vault.perms import check_home
from ..vault.secrets import SecretStore, checked_secret
from . import (
    holds,
    lifecycle,
    opening,
    recovering,
    retrying,
    spend_holds,
    task_processes,
    vault_start,
)
from .acknowledging import Acknowledging
from .admission import Admission
from .answering import Answering
from .api.attach import Viewers
from .api.records import ChannelState
from .audit import AuditLog
from .bus_bell import BusBell
from .driver import TaskDriver
from .duties import Duties
from .intake import Intake
from .learning import Learner
from .lifecycle import Life
from .locks import LockManager
from .owner import OwnerChannel, OwnerLogSink, Sink
from .reload import Reloaded, reload_kernel
from .scheduler import Scheduler
from .sessions import SANDBOX_PREFIX, SessionSupervisor

if TYPE_CHECKING:
    from ..tools.mcp.servers import McpServers

log = logging.getLogger("pfar.kernel")


@dataclass(frozen=True, slots=True)
class KernelStatistics:
    boot_id: str
    running: int
    counts: dict[str, int]
    commits: int
    writes: int


class Kernel:
    # made by start(), in its stages
    config: Config
    journal: Store
    secrets: SecretStore
    knowledge: knowledge.KnowledgeStore | None
    sessions: SessionSupervisor
    redactor: Redactor
    log_filter: RedactingFilter
    audit: AuditLog
    owner: OwnerChannel
    tools: ToolRegistry
    templates: TemplateRegistry
    model: InferenceProxy
    locks: LockManager
    learner: Learner
    services: Services
    scheduler: Scheduler
    mcp: McpServers | None = None  # set with the services (kernel/mcp_servers.py)
    admission: Admission

    def __init__(
        self,
        home: Home,
        config: Config | None = None,
        *,
        tools: ToolRegistry | None = None,
        model: ChatModel | None = None,
        fault_hook: FaultHook | None = None,
        channels: list[str] | None = None,
    ) -> None:
        self.home = home
        self._config = config
        # the chat channels the owner's messages fan out to (default: [channels] in config)
        self._channel_names = channels
        # each channel's connection, as its supervisor (adapters/) last said
        self.channel_states: dict[str, ChannelState] = {}
        self._tools = tools
        # a model to think with instead of [llm]'s (benchmarks): it answers in-process
        self._model = model
        self._faults = fault_hook if fault_hook is not None else FaultHook.from_env()
        self.boot_id = str(uuid.uuid4())
        self._sandbox_home = sandbox.home_tag(home.root)
        # whether it takes work, what it holds while it runs, why it stopped (lifecycle.py)
        self.life = Life(home)
        # who watches loop tasks' output live (`pfar attach`)
        self.viewers = Viewers()
        # rung by each commit that appends to the event bus (`Operator.subscribe` waits)
        self.bus_bell = BusBell()
        # the coroutines that advance tasks (kernel/driver.py)
        self.driver = TaskDriver(
            self, accepting=lambda: self.life.accepting, write_failed=self._fail_stop
        )
        # events and tasks coming in (kernel/intake.py)
        self.intake = Intake(self)
        # what the owner says to a task that waits on them (kernel/answering.py)
        self.answering = Answering(self)
        # the kernel's operations are its parts' own (their docstrings say what each does)
        self.advance = self.driver.advance  # the one way any task continues
        self.is_running = self.driver.is_running
        self.running_ids = self.driver.running_ids
        self.stop_coroutine = self.driver.stop_coroutine
        self.wait_idle = self.driver.wait_idle
        self.wait_task = self.driver.wait_task
        self.submit = self.intake.submit
        self.start_loop = self.intake.start_loop
        self.start_workflow = self.intake.start_workflow
        self.resume_workflow = self.intake.resume_workflow
        self.answer = self.answering.answer
        self.provide_credential = self.answering.provide_credential
        self.send = self.answering.send
        self.loop_context = self.answering.loop_context
        # what runs beside the tasks while the kernel does (kernel/duties.py)
        self.duties = Duties(
            self,
            sandbox_home=self._sandbox_home,
            sandbox_running=self._sandbox_running,
        )
        # run at shutdown after the wait and the flush, while the journal is still open:
        # the chat channels send what the wait produced, then stop
        self.before_close: list[Callable[[], Awaitable[None]]] = []
        # what reaches the owner without the journal's outbox (each chat channel, sent to
        # directly): the fail-stop notice goes through them (kernel/fail_stop.py)
        self.last_words: list[Sink] = []
        self.hooks = NO_HOOKS
        # set by the operator API: the process serving this kernel shuts it down gracefully
        self.shutdown_requested = asyncio.Event()
        # set by the process serving this kernel (a second Ctrl-C): a shutdown's wait for
        # running tasks ends now; they are left in the journal for the next start
        self.stop_now = asyncio.Event()
        self.report: RecoveryReport | None = None
        self.template_errors: list[ConfigError] = []
        self._vault = vault_start.VaultStart()  # what the start's vault checks found
        # keeps vault/acknowledged up with the journal once recovery has reported
        self.acknowledged: Acknowledging | None = None

    # -- startup -------------------------------------------------------------

    async def start(self) -> RecoveryReport:
        # Stage 1: foundation. A home another user can write to is refused before
        # anything in it is loaded: they could choose what the kernel runs.
        check_home(self.home)
        config = self._config or Config.load(self.home.config)
        self.config = config
        self.duties.watch_disk(config)
        in_vault = config.vault.backend == "sqlite"  # else the journal is on a server
        if in_vault and not self.home.sessions_db.exists():
            raise VaultMissing(
                f"{self.home.sessions_db} does not exist; run `pfar init` to create a new home "
                "(an existing home whose vault went missing should be restored from backup)"
            )
        self.life.take_home()
        opened: list[SecretStore | Store] = []
        try:
            key = keys.unlock(self.home)
            # before anything opens the vault to write: a damaged vault, or a journal
            # behind what the kernel acknowledged, stops the start here, vault untouched
            self._vault = vault_start.check_at_start(self.home, key, journal=in_vault)
            await opening.open_stores(
                self,
                config,
                key,
                opened,
                fault_hook=self._faults,
                write_failed=self._fail_stop,
                sandbox_home=self._sandbox_home,
                tools=self._tools,
                model=self._model,
            )
        except BaseException:
            for resource in opened:
                await opening.close(resource)
            self.life.let_go()
            raise
        opening.log_start(self, config, self._vault)
        self.owner = OwnerChannel(self.journal, OwnerLogSink(self.home.owner_log))

        try:
            return await self._recover_and_open(config)
        except BaseException:
            # a start that fails half-way leaves nothing open: the home can be retried
            await self._release_after_failed_start()
            raise

    async def _recover_and_open(self, config: Config) -> RecoveryReport:
        # Stage 2: recovery (kernel/recovering.py)
        recovered = await recovering.recover(
            self,
            config,
            channel_names=self._channel_names,
            vault=self._vault,
            sandbox_home=self._sandbox_home,
            sandbox_running=self._sandbox_running,
        )
        to_resume = recovered.to_resume

        # Stage 4: background services (adapters attach their sinks before `open`)
        self.life.accepting = True
        self.duties.start(recovered.schedule_plans, on_ended=self._background_ended)

        self.life.hold_collector()

        # Stage 5: notify, then resume; every task enters the queue before any takes a
        # slot, so they start by priority, not in the order recovery listed them
        self.owner.notify()
        if self.admission.max_concurrent:
            await self.driver.enter_recovered(to_resume)
        for task_id in to_resume:
            self.advance(task_id)
        return recovered.report

    async def end_processes(self, task_id: str | None, event: str) -> int:
        """End the process groups that steps (of `task_id`, or of every task) recorded and
        that still run as recorded; audit each one as `event`. Returns how many."""
        return await task_processes.end_recorded(self.journal, self.audit, task_id, event)

    async def _release_after_failed_start(self) -> None:
        self.audit.close()
        await self.abort()

    def add_sink(self, sink: Sink) -> None:
        self.owner.add_sink(sink)

    def _sandbox_running(self, label: str) -> bool:
        """A sandbox's label names a task running here, or a session whose agent does."""
        if label.startswith(SANDBOX_PREFIX):
            return self.sessions.is_running(label.removeprefix(SANDBOX_PREFIX))
        return self.driver.is_running(label)

    # -- the owner's hold: cancel, pause, resume (see holds.py) -------------------

    async def cancel_task(self, task_id: str, by: Actor = IN_PROCESS) -> holds.HoldResult:
        """End the task (and its subtasks) as Cancelled; refused for an ended task."""
        return await holds.cancel_with_subtasks(self, task_id, by)

    async def pause_task(self, task_id: str, by: Actor = IN_PROCESS) -> holds.HoldResult:
        """Pause the task at its next step boundary (now, if no coroutine holds it)."""
        return await holds.pause(self, task_id, by)

    async def resume_task(self, task_id: str, by: Actor = IN_PROCESS) -> holds.HoldResult:
        """Continue a paused task from the journal (or withdraw a pause not yet reached)."""
        return await holds.resume(self, task_id, by)

    async def retry_task(self, task_id: str, by: Actor = IN_PROCESS) -> retrying.RetryResult:
        """Retry a Failed task whose failure is recoverable (or a loop's waiting answer)."""
        return await retrying.retry(self, task_id, by)

    def _fail_stop(self, exc: BaseException) -> None:
        """A write to the vault failed (kernel/fail_stop.py): the kernel stops."""
        disk_watch = self.duties.disk
        self.life.fail_stop(
            exc,
            journal_failed=self.journal.writer.failure is not None,
            release_reserve=lambda: disk_watch is not None and disk_watch.release(),
        )

    def _background_ended(self, task: asyncio.Task[None]) -> None:
        self.life.duty_ended(task, self._fail_stop)

    def set_secret(self, name: str, value: str) -> None:
        """Store a secret in secrets.db; from now on it is redacted wherever it appears."""
        self.secrets.set(name, checked_secret(name, value))
        self.redactor.refresh()
        self.audit.log("secret_set", name=name)

    async def reload(self) -> Reloaded:
        """`pfar reload` and SIGHUP: templates, hooks and the live settings, again."""
        if not self.life.accepting:
            raise ShuttingDown()
        done = await reload_kernel(self)
        self.audit.log("reloaded", **done.to_json())
        if "budget" in done.applied:  # a raised day's or month's cap lets its tasks go now
            await spend_holds.lift(self)
        return done

    def remove_secret(self, name: str) -> None:
        """Drop a secret from secrets.db. Its value stays masked in what this kernel
        writes until it stops: text that held it may still come back from a tool."""
        if not self.secrets.remove(name):
            raise UnknownSecret(name)
        self.audit.log("secret_removed", name=name)

    @property
    def lock_owner(self) -> LockOwner:
        pid = os.getpid()
        return LockOwner(self.boot_id, socket.gethostname(), pid, start_time(pid) or 0)

    # -- shutdown ----------------------------------------------------------------

    async def shutdown(self, timeout: float | None = None) -> list[str]:
        """Graceful shutdown (spec §9). Returns the ids of tasks left in the journal."""
        return await lifecycle.shutdown(self, timeout)

    async def abort(self) -> None:
        """Stop without the graceful steps (tests and fail-stop): the journal is as it is."""
        await lifecycle.abort(self)

    @property
    def fail_stopped(self) -> BaseException | None:
        """The failed write that stopped the kernel (fail-stop), if one did."""
        return self.life.fail_stopped

    @property
    def accepting(self) -> bool:
        """False from the start of a shutdown (or a fail-stop) on: no new work is taken."""
        return self.life.accepting

    @property
    def failure(self) -> str | None:
        """Why the kernel stopped itself (a duty ended), if it did."""
        return self.life.failure

    @property
    def stopped(self) -> asyncio.Event:
        return self.life.stopped

    async def statistics(self) -> KernelStatistics:
        return KernelStatistics(
            boot_id=self.boot_id,
            running=self.driver.count(),
            counts=await self.journal.tasks.counts(),
            commits=self.journal.writer.commits,
            writes=self.journal.writer.writes,
        )

    def title(self, task: TaskRecord) -> str:
        """How the owner's messages name the task: its template's title (a loop task's own
        title, from its prompt or `--title`)."""
        meta = task.extracted_metadata or {}
        if task.kind is TaskKind.loop and isinstance(meta.get("title"), str) and meta["title"]:
            return str(meta["title"])
        tpl = self.templates.get(task.template_id)
        return tpl.title if tpl else task.template_id


@contextlib.asynccontextmanager
async def open_kernel(home: Home | str, **kwargs: Any) -> AsyncIterator[Kernel]:
    """Start a kernel on `home`; shut it down gracefully on exit."""
    kernel = Kernel(home if isinstance(home, Home) else Home.from_env(home), **kwargs)
    await kernel.start()
    try:
        yield kernel
    finally:
        await kernel.shutdown()
