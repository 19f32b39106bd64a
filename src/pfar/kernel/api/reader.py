"""The operator API's reads: tasks, timelines, questions, sessions, workflows.

A `HomeReader` answers from a home's vault and needs no running kernel: `pfar tasks`
and `pfar task show` read a home this way, whether or not a kernel owns it (SQLite's
WAL lets a reader look while the kernel writes). A running kernel's `Operator` is a
`HomeReader` over the kernel's own journal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ...config import Config
from ...errors import BadRequest
from ...journal import ApprovalStatus, CredentialStatus, TaskState
from ...journal.bus_sql import BusEvent
from ...journal.costs_sql import Spent
from ...journal.open_store import backend_of, open_home_journal
from ...journal.sessions import SessionStatus
from ...journal.sqlite import open_readonly
from ...journal.store import Store
from ...journal.task_pages import TaskFilter
from ...recovery import plan_recovery
from ...runners.loop.context import ContextStats
from ...vault import keys
from ...vault.home import Home, HomeLock
from ...vault.knowledge import Learning
from ..admission import Waiting
from . import offline, task_query
from .activity import Activity, activity
from .attach import Shown
from .conversation import conversation
from .conversation_records import Conversation
from .costs import Costs, costs
from .locks_view import LockView
from .mcp_view import McpServerView, configured
from .providers_view import ProviderView
from .providers_view import configured as configured_providers
from .records import (
    BootRecovery,
    ChannelView,
    Questions,
    TaskListing,
    TaskSummary,
    TaskTimeline,
)
from .timeline import task_timeline
from .trace import task_as_trace
from .views import ApprovalView, CredentialPromptView, SessionView
from .wire import wire_json
from .workflow_check import WorkflowCheck, check_workflow

MAX_LIMIT = 1_000_000  # a listing longer than this is a job for a script and the journal


@dataclass(frozen=True, slots=True)
class PlannedRecovery:
    """What recovery would do with one unfinished task, and why."""

    task: TaskSummary
    action: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**wire_json(self.task), "action": self.action, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class RecoveryPreview:
    """`pfar recover --dry-run`: what a start now would do; `kernel_running` says one
    holds the home (it recovered at its own start)."""

    kernel_running: bool
    decisions: tuple[PlannedRecovery, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel_running": self.kernel_running,
            "decisions": [d.to_json() for d in self.decisions],
        }


class HomeReader:
    """Reads of a home. Ids may be given whole or as an unambiguous prefix.

    Open one on a home with `HomeReader(home)` (a context manager: it opens the vault
    read-only when first asked, and closes what it opened); a kernel's `Operator` is one
    already, over the kernel's journal.
    """

    def __init__(self, home: Home, journal: Store | None = None) -> None:
        self.home = home
        self._journal = journal
        self._opened: list[Store] = []

    def __enter__(self) -> HomeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> HomeReader:
        """Open the home's journal now when it is on a server (a connection belongs to
        the event loop that made it); a vault file is opened when first read."""
        if self._journal is None and backend_of(self.home) != "sqlite":
            self._journal = await open_home_journal(self.home)
            self._opened.append(self._journal)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for resource in self._opened:
            await resource.aclose()
        self._opened.clear()

    def close(self) -> None:
        """Close what this reader opened (never a kernel's journal)."""
        for resource in self._opened:
            resource.close()
        self._opened.clear()

    @property
    def journal(self) -> Store:
        if self._journal is None:
            if backend_of(self.home) != "sqlite":
                raise RuntimeError(
                    "a reader of a home whose journal is on a server is opened "
                    "with `async with HomeReader(home)`"
                )
            self._journal = open_readonly(self.home.sessions_db, key=keys.unlock(self.home))
            self._opened.append(self._journal)
        return self._journal

    # -- tasks -------------------------------------------------------------------

    async def tasks(
        self, states: Sequence[TaskState] | None = None, limit: int = 50
    ) -> list[TaskSummary]:
        """Tasks, newest first; only those in `states` when given; at most `limit`."""
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequest("limit", f"must be 1 to {MAX_LIMIT}, not {limit}")
        wanted = [TaskState(s).value for s in states] if states else None
        listed = [TaskSummary.of(t) for t in await self.journal.tasks.listing(wanted, limit)]
        return await self._with_waits(listed)

    async def task_page(
        self, wanted: TaskFilter | None = None, cursor: str | None = None, limit: int = 50
    ) -> TaskListing:
        """A page of the tasks `wanted` picks, newest first by creation, starting after
        the page whose `next_cursor` is `cursor` (the first page without one). Tasks
        created meanwhile never shift a later page: each task is listed once.

        Raises:
            BadRequest: naming `limit`, `since`, `until`, `template`, `text` or `cursor`.
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequest("limit", f"must be 1 to {MAX_LIMIT}, not {limit}")
        filter_ = task_query.checked(wanted or TaskFilter())
        after = task_query.cursor(cursor)
        page = await self.journal.tasks.page(filter_, after, limit)
        listed = await self._with_waits([TaskSummary.of(t) for t in page.tasks])
        spent = await self.journal.tasks.spent_by_tasks([t.task_id for t in listed])
        nothing = Spent()
        listed = [
            dataclasses.replace(
                t,
                cost_usd=spent.get(t.task_id, nothing).cost_usd,
                tokens=spent.get(t.task_id, nothing).tokens,
                unpriced_calls=spent.get(t.task_id, nothing).unpriced,
            )
            for t in listed
        ]
        return TaskListing(tuple(listed), page.next_cursor)

    async def _with_waits(self, listed: list[TaskSummary]) -> list[TaskSummary]:
        """Each task with what its tool call waits for (a lock another task holds)."""
        waits = await self.journal.locks.waits()
        return [
            dataclasses.replace(t, waiting_for=waits[t.task_id]) if t.task_id in waits else t
            for t in listed
        ]

    async def task(self, task_id: str) -> TaskSummary:
        tasks = self.journal.tasks
        return TaskSummary.of(await tasks.get(await tasks.resolve_id(task_id)))

    async def timeline(self, task_id: str) -> TaskTimeline:
        """The task's whole story from the journal, in time order."""
        return await task_timeline(self.journal, await self.journal.tasks.resolve_id(task_id))

    async def trace(self, task_id: str) -> str:
        """The task's journal written as a trace.md (the traced-workflow format)."""
        return await task_as_trace(self.journal, await self.journal.tasks.resolve_id(task_id))

    async def conversation(self, task_id: str, after: int = -1) -> Conversation:
        """A loop task's turns after `after` (-1: all of them) and its state. It only
        reads: no viewer's mark moves (`pfar attach` still shows them as new)."""
        return await conversation(self.journal, await self.journal.tasks.resolve_id(task_id), after)

    async def recovery_preview(self, config: Config | None = None) -> RecoveryPreview:
        """What recovery would do with every unfinished task now; changes nothing."""
        config = config or Config.load(self.home.config)
        last = await self.journal.events.last_boot()
        running = HomeLock(self.home).is_held_elsewhere()
        crashed = last is not None and not last["clean"] and not running
        plan = await plan_recovery(
            self.journal,
            datetime.now(UTC),
            timedelta(seconds=config.recovery.max_task_age_seconds),
            config.recovery.max_recovery_attempts,
            crashed,
        )
        decisions = tuple(
            PlannedRecovery(TaskSummary.of(plan.tasks[d.task_id]), d.action.value, d.reason)
            for d in plan.decisions
        )
        return RecoveryPreview(running, decisions)

    async def activity(self, days: int = 30) -> Activity:
        """Per day over the last `days` UTC days (1 to 366, today's so far included):
        tasks created by kind, steps started, model calls with their tokens and cost by
        model and by template; every day present, zeros where nothing happened."""
        return await activity(self.journal, days)

    async def costs(
        self, by: str = "day", since: str | None = None, until: str | None = None
    ) -> Costs:
        """What model calls cost from `since` to `until` (UTC days as YYYY-MM-DD, both
        included; None: unbounded), by day, model, template or task, with their total
        and the models whose calls had no price."""
        return await costs(self.journal, by, since, until)

    async def recoveries(self, limit: int = 20) -> list[BootRecovery]:
        """The newest `limit` starts, newest first, each with its recovery report: every
        restart's report, each line with the tasks it is about."""
        if not 1 <= limit <= 1000:
            raise BadRequest("limit", f"must be 1 to 1000, not {limit}")
        # one boot more: how the run before the oldest one shown ended
        boots = await self.journal.events.boots(limit + 1)
        running = self._running_boot(boots[0].boot_id if boots else None)
        return [
            BootRecovery.of(
                boot, boots[i + 1] if i + 1 < len(boots) else None, boot.boot_id == running
            )
            for i, boot in enumerate(boots[:limit])
        ]

    def _running_boot(self, newest: str | None) -> str | None:
        """The boot of the kernel running on this home, if one runs (the newest boot,
        while a kernel holds the home)."""
        return newest if HomeLock(self.home).is_held_elsewhere() else None

    # -- the owner's questions ----------------------------------------------------

    async def questions(self, *, answered: bool = False) -> Questions:
        """Pending approvals and credential prompts; with `answered`, every one kept."""
        approvals = [s.value for s in ApprovalStatus] if answered else ["pending"]
        prompts = [s.value for s in CredentialStatus] if answered else ["pending"]
        questions = self.journal.questions
        return Questions(
            tuple(map(ApprovalView.of, await questions.approvals(approvals))),
            tuple(map(CredentialPromptView.of, await questions.credential_prompts(prompts))),
        )

    async def approval(self, approval_id: str) -> ApprovalView:
        """The whole question, with every argument of the action it lets run."""
        questions = self.journal.questions
        whole = await questions.resolve_approval_id(approval_id)
        return ApprovalView.of(await questions.approval(whole))

    # -- views a kernel answers live, read here from the vault when none runs ----------

    async def events(
        self, after: int | None = None, *, subscriber: str | None = None, limit: int = 100
    ) -> list[BusEvent]:
        """Task events in commit order after `after` (by default after `subscriber`'s
        offset, or from the first one kept)."""
        if subscriber is not None:
            offline.check_subscriber(subscriber)
        if not 1 <= limit <= 1000:
            raise BadRequest("limit", "must be between 1 and 1000")
        events = self.journal.events
        if after is None:
            after = (await events.bus_offset(subscriber) if subscriber else None) or 0
        return await events.bus(after, limit)

    async def learnings(self, search: str | None = None, limit: int = 50) -> list[Learning]:
        """What tasks learned: the newest, or the ones most relevant to `search`."""
        if not 1 <= limit <= 1000:
            raise BadRequest("limit", "must be between 1 and 1000")
        return offline.learnings(self.home, search, limit)

    async def mcp_servers(self) -> list[McpServerView]:
        """With no kernel running: the servers config.toml names, none running."""
        return configured(Config.load(self.home.config).mcp, "not running")

    async def providers(self) -> list[ProviderView]:
        """With no kernel running: the providers config.toml names (a breaker lives in
        the kernel's memory, and starts closed)."""
        return configured_providers(Config.load(self.home.config).llm)

    async def locks(self) -> list[LockView]:
        """The resource locks tool calls hold now, on every kernel sharing the journal."""
        return [LockView.of(h) for h in await self.journal.locks.held()]

    async def queue(self) -> list[Waiting]:
        """With no kernel running: the tasks queued for a slot, in the order a kernel
        would start them (a running kernel's `Operator` tells its live queue)."""
        return await offline.queue(self.journal)

    async def channels(self) -> list[ChannelView]:
        """With no kernel running: each enabled channel, stopped, with its position and
        its deliveries by status as the vault keeps them."""
        return await offline.channels(self.journal, Config.load(self.home.config))

    async def context(self, task_id: str) -> ContextStats:
        """How full a loop task's context is, as its next model call would be sent."""
        task = await self.task(task_id)
        return await offline.context(self.journal, task.task_id, Config.load(self.home.config))

    async def replay(self, task_id: str, *, from_start: bool = False) -> list[Shown]:
        """With no kernel running, `attach`: the turns journaled since the task was last
        watched (all of them, `from_start`), and its state; nothing moves meanwhile."""
        task = await self.task(task_id)
        return await offline.replay(self.journal, task.task_id, from_start=from_start)

    # -- sessions and workflows ---------------------------------------------------

    async def sessions(self, status: SessionStatus | None = None) -> list[SessionView]:
        """Sessions, oldest first; only those in `status` when given."""
        return [SessionView.of(s) for s in await self.journal.sessions.list(status)]

    async def session(self, session_id: str) -> SessionView:
        return SessionView.of(await self.journal.sessions.get(session_id))

    async def workflow_status(self, directory: str) -> WorkflowCheck:
        """What the trace.md in `directory` says: state, resume point, artifact check."""
        return check_workflow(directory)
