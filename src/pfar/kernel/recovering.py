"""Stage 2 of the start: recovery. The boot is recorded, what earlier boots left is
let go (stale locks, expired questions, old rows, orphaned processes, sandboxes and
sessions), every task's fate is decided and journaled with the owner's report, and
from then on the journal's commits are acknowledged (vault/acknowledged).

Nothing runs yet: the kernel starts its duties and resumes the tasks afterwards.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..config import Config
from ..errors import ConfigError
from ..journal import TaskRecord
from ..journal.locks_sql import LockOwner
from ..journal.message_keys import ReportKey
from ..llm.proxy import InferenceProxy
from ..recovery import RecoveryReport, plan_recovery, recover_tasks
from ..runners.schedules import Due
from ..tools import sandbox
from ..vault import restored
from ..vault.backup import pfar_version
from ..vault.home import Home
from . import mcp_servers, task_processes, vault_start
from .acknowledging import Acknowledging
from .admission import Admission
from .api.records import ChannelState
from .audit import AuditLog
from .bus_bell import BusBell
from .duties import Duties
from .scheduler import Scheduler, SchedulerHost
from .sessions import SessionSupervisor
from .task_services import alive

log = logging.getLogger("pfar.kernel")


class RecoveringHost(SchedulerHost, Protocol):
    """What recovery reads of the kernel, and what it sets (the scheduler and the
    admission are made here, the report and the acknowledging journaled here)."""

    home: Home
    boot_id: str
    audit: AuditLog
    sessions: SessionSupervisor
    model: InferenceProxy
    template_errors: list[ConfigError]
    channel_states: dict[str, ChannelState]
    scheduler: Scheduler
    admission: Admission
    report: RecoveryReport | None
    acknowledged: Acknowledging | None
    bus_bell: BusBell

    @property
    def duties(self) -> Duties: ...

    @property
    def lock_owner(self) -> LockOwner: ...

    def title(self, task: TaskRecord) -> str: ...

    async def end_processes(self, task_id: str | None, event: str) -> int: ...


@dataclass(frozen=True, slots=True)
class Recovered:
    """What the kernel goes on with: the report, the tasks to resume, and the schedules' plans
    (their missed slots fire once the duties start)."""

    report: RecoveryReport
    to_resume: list[str]
    schedule_plans: list[Due]


async def recover(
    k: RecoveringHost,
    config: Config,
    *,
    channel_names: list[str] | None,
    vault: vault_start.VaultStart,
    sandbox_home: str,
    sandbox_running: Callable[[str], bool],
) -> Recovered:
    previous = await k.journal.events.last_boot()
    crashed = previous is not None and not previous["clean"]
    names = channel_names
    if names is None:
        names = config.channels.receivers()
    in_doubt = await k.journal.adapters.register_channels(names)
    for name in [*names, *(n for n in config.channels.enabled() if n not in names)]:
        k.channel_states[name] = ChannelState(name, "starting")
    await k.journal.questions.supersede_old_prompts()
    await k.journal.events.start_boot(k.boot_id, os.getpid(), pfar_version())
    # locks of kernels that died here (their holder process is gone) are let go now
    stale = await k.journal.locks.clear_stale(k.lock_owner, alive)
    if stale:
        k.audit.log("stale_locks_released", count=stale)
    await k.duties.expire()
    await k.duties.cleanup()
    if not k.duties.disk_watch.make_reserve() and config.vault.reserve_mb:
        log.warning("no room for the journal's reserve of %d MB", config.vault.reserve_mb)
    await k.duties.check_disk()
    for err in k.template_errors:
        for problem in err.each:
            k.audit.log("template_invalid", error=str(problem))

    # Stage 3 (services) was loaded before any journal write: see Kernel.start
    now = datetime.now(UTC)
    plan = await plan_recovery(
        k.journal,
        now,
        timedelta(seconds=config.recovery.max_task_age_seconds),
        config.recovery.max_recovery_attempts,
        crashed,
        claim=True,
    )
    # spec §7.1 step 4: end what interrupted steps left running, before deciding
    # anything about those steps (a command still running is not "in doubt", it is
    # running; ending it first makes the owner's retry the only run)
    orphans = await k.end_processes(None, "orphan_process_ended")
    # R7: sandboxes of an earlier boot (no task runs yet): killed before any resumes
    orphan_sandboxes = sandbox.reconcile(sandbox_home, sandbox_running)
    # and MCP servers an earlier kernel left (kernel/mcp_servers.py)
    mcp_orphans = await mcp_servers.end_orphans(sandbox_home)
    if mcp_orphans:
        k.audit.log("mcp_servers_ended", count=mcp_orphans, at="start")
    # and what tasks' commands left running outside a sandbox (nohup, setsid …)
    left = await task_processes.end_processes(k.journal, task_processes.any_state)
    if left:
        k.audit.log("task_processes_ended", count=left, at="start")
    sessions_recovered = await k.sessions.recover_after_crash()
    if sessions_recovered:
        k.audit.log("sessions_recovered", session_ids=sessions_recovered)
    # cron slots missed while down: fired after recovery, said in its report
    k.scheduler = Scheduler(k)
    k.admission = Admission(config.scheduler.max_concurrent, k.model.headroom)
    schedule_plans = await k.scheduler.plans()
    report, to_resume = await recover_tasks(
        k.journal,
        plan,
        k.title,
        count_attempts=crashed,
        report_key=ReportKey(k.boot_id),
        question_timeout=config.approvals.approval_timeout_seconds,
        orphan_processes=orphans,
        orphan_sandboxes=orphan_sandboxes,
        sessions_recovered=sessions_recovered,
        channel_doubts=in_doubt,
        schedules=k.scheduler.describe(schedule_plans),
        vault=vault.notes,
    )
    k.report = report
    await _acknowledge(k, config, vault)
    k.audit.log("recovery", crashed=crashed, **report.to_json())
    return Recovered(report, to_resume, schedule_plans)


async def _acknowledge(k: RecoveringHost, config: Config, vault: vault_start.VaultStart) -> None:
    """From the recovery report on (it is journaled now, with what the vault checks
    found), every commit is work the kernel acknowledges: vault/acknowledged follows
    the journal, and a restore already reported is not reported again."""
    if k.journal.path is None:
        return  # a journal on a server: the server keeps it whole, no local record follows it
    try:
        k.acknowledged = Acknowledging(
            k.home.vault_dir,
            await k.journal.events.bus_high_water(),
            previous=vault.previous,
            boot_id=k.boot_id,
            synchronous=config.vault.synchronous,
            # the audit log's hash chain head, checkpointed with the record
            audit_head=k.audit.head,
        )
    except OSError as exc:  # a check on the journal, not the journal: tasks go on
        log.error(
            "vault/acknowledged: cannot be written (%s); a journal that goes "
            "back in time may not be noticed at the next start",
            exc,
        )
    else:
        k.bus_bell.inner = k.acknowledged.watcher  # the writer's watcher tells it first
    if vault.restored is not None:
        restored.remove(vault.restored)
