"""The task store's reads: tasks, their steps, their model calls and hook verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from ..errors import UnknownTask
from . import activity_sql, costs_sql, hooks_sql, steps_sql, task_pages, tasks_sql
from .activity_sql import StoredActivity
from .backing import Backing
from .costs_sql import CostsBy, Spent, StoredCosts
from .ids import resolve_id
from .json_text import JsonObject, JsonValue
from .payloads import Payload
from .records import StepRecord, TaskRecord, UnreadableTask
from .rows import LlmCallMade, LlmUsage, StepProcess
from .task_pages import TaskCursor, TaskFilter, TaskPage


class TaskReads:
    """What the journal holds of tasks; a step row the task's progress promises and
    that cannot be read is damage, reported, never a short answer."""

    _db: Backing

    async def get(self, task_id: str) -> TaskRecord:
        rec = await self._db.read(tasks_sql.get, task_id)
        if rec is None:
            raise UnknownTask(task_id)
        return rec

    async def payload(self, task_id: str) -> Payload:
        found = await self._db.read(tasks_sql.get_state_payload, task_id)
        if found is None:
            raise UnknownTask(task_id)
        return found[2]

    async def resolve_id(self, prefix: str) -> str:
        """Accept a full id or an unambiguous prefix, as `pfar task show` prints them."""
        return await self._db.read(
            resolve_id, "task_journal", "task_id", prefix, "task", UnknownTask
        )

    async def listing(
        self, states: Sequence[str] | None = None, limit: int = 50
    ) -> list[TaskRecord | UnreadableTask]:
        """Tasks newest first; a row that cannot be read as one is listed as UnreadableTask."""
        return await self._db.scan(tasks_sql.listing, states, limit)

    async def page(
        self, wanted: TaskFilter, after: TaskCursor | None = None, limit: int = 50
    ) -> TaskPage:
        """Up to `limit` tasks matching `wanted`, newest first by creation, after the
        task `after` names (task_pages.py: no task repeated or skipped from page to page)."""
        return await self._db.scan(task_pages.page, wanted, after, limit)

    async def latest_workflow_task(self, directory: str) -> str | None:
        return await self._db.scan(tasks_sql.latest_workflow_task, directory)

    async def counts(self) -> dict[str, int]:
        return await self._db.scan(tasks_sql.counts)

    async def unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]:
        """Unfinished tasks, and the unfinished rows that cannot be read as tasks."""
        return await self._db.scan(tasks_sql.unfinished)

    async def claim_unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]:
        """The unfinished tasks this kernel recovers and runs. One kernel owns a SQLite
        home (its lock file refuses a second before the vault is opened), so its claim
        is every unfinished task, and there is no lease to record."""
        return await self.unfinished()

    async def steps(self, task_id: str) -> list[StepRecord]:
        steps = await self._db.read(steps_sql.for_task, task_id)
        await self._all_there(task_id, [s.step for s in steps])
        return steps

    async def step_results(self, task_id: str) -> list[JsonValue]:
        rows = await self._db.read(steps_sql.results_for_task, task_id)
        await self._all_there(task_id, [step for step, _ in rows])
        return [result for _, result in rows]

    async def _all_there(self, task_id: str, numbers: list[int]) -> None:
        """The step rows read are every step the task's progress says it finished."""
        done = await self._steps_done(task_id)
        if numbers != list(range(len(numbers))) or len(numbers) < done:
            await self._check_steps()
        if len(numbers) < done:
            self._missing_steps(task_id, len(numbers), done)

    async def step(self, task_id: str, step: int) -> StepRecord | None:
        rec = await self._db.read(steps_sql.get, task_id, step)
        if rec is None and step < (done := await self._steps_done(task_id)):
            await self._check_steps()
            self._missing_steps(task_id, 0, done)
        return rec

    def _missing_steps(self, task_id: str, found: int, done: int) -> None:
        """A row hidden by a damaged key can leave the b-tree in order, so even SQLite's
        integrity check may pass; the task's progress still says the row must exist."""
        raise self._db.damaged(
            f"table task_steps: task {task_id} finished {done} step(s) but "
            f"{'only ' + str(found) if found else 'not all'} of their rows can be read"
        )

    async def _steps_done(self, task_id: str) -> int:
        """How many steps the task's progress says were finished (each one has its row)."""
        progress = await self._db.read(tasks_sql.progress, task_id)
        last, current = progress.get("last_completed"), progress.get("current_step")
        return max(
            last + 1 if isinstance(last, int) else 0, current if isinstance(current, int) else 0
        )

    async def _check_steps(self) -> None:
        """Steps missing from what the task's progress promises: a damaged page can hide
        rows without an error, so look before answering with a short list. A step row
        is written in the same commit as the progress that names it."""
        await self._db.check_table("task_steps")

    async def steps_in_flight(self) -> dict[str, StepRecord]:
        """Task id -> its step still marked started (a task runs one step at a time)."""
        return {rec.task_id: rec for rec in await self._db.scan(steps_sql.in_flight)}

    async def started_processes(
        self, task_id: str | None = None
    ) -> list[tuple[str, int, StepProcess]]:
        return await self._db.scan(steps_sql.started_processes, task_id)

    async def llm_usage(self, task_id: str) -> LlmUsage:
        return await self._db.read(tasks_sql.llm_usage, task_id)

    async def activity(self, since: date, until: date) -> StoredActivity:
        """Tasks created, steps started and model calls by day, for the days `[since,
        until)`: read through the tables' time indexes, so it costs what the window holds."""
        return await self._db.scan(activity_sql.activity, since, until)

    async def llm_calls(self, task_id: str) -> list[LlmCallMade]:
        return await self._db.read(tasks_sql.llm_calls, task_id)

    async def costs(self, by: CostsBy, since: str | None, until: str | None) -> StoredCosts:
        """Model calls of the days `[since, until)` summed by `by` (a scan: it grows
        with the window, or with history when a side is unbounded)."""
        return await self._db.scan(costs_sql.costs, by, since, until)

    async def spent_by_task(self, task_id: str) -> Spent:
        return await self._db.read(costs_sql.spent_by_task, task_id)

    async def spent_by_tasks(self, task_ids: Sequence[str]) -> dict[str, Spent]:
        return await self._db.scan(costs_sql.spent_by_tasks, list(task_ids))

    async def spent_between(self, since: str, until: str) -> Spent:
        # a row a day of the window (llm_spend_days): a read, not a scan
        return await self._db.read(costs_sql.spent_between, since, until)

    async def hook_verdict(self, task_id: str, key: str) -> JsonObject | None:
        return await self._db.read(hooks_sql.get, task_id, key)
