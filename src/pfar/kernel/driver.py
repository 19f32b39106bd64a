"""The driver: the coroutines that advance tasks, one per task at most.

`advance` is the one way any task continues (after a submit, an answer, a restart or
the owner's resume alike): it starts the task's coroutine, or, when one already
holds the task, has it go round once more. A coroutine takes an admission slot,
lets the task's runner advance it from the journal, and on its way out settles what
the task left: a pause no boundary reached, the parent it wakes, what it learned,
what its commands left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from ..errors import IllegalTransition, PfarError
from ..journal import TaskKind, TaskRecord, TaskState
from ..journal.payloads import Queued, Working, pause_requested
from ..journal.store import Store
from ..runners import Services, TemplateRegistry
from ..runners.registry import runner_for
from . import task_processes
from .admission import Admission
from .learning import Learner

log = logging.getLogger("pfar.kernel")


class DriverHost(Protocol):
    """What the driver reads of the kernel, each time it needs it (all made at start)."""

    journal: Store
    admission: Admission
    services: Services
    templates: TemplateRegistry
    learner: Learner


class TaskDriver:
    def __init__(
        self,
        host: DriverHost,
        *,
        accepting: Callable[[], bool],
        write_failed: Callable[[BaseException], None],
    ) -> None:
        self._host = host
        self._accepting = accepting
        self._write_failed = write_failed  # the kernel's fail-stop
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._ending_processes: set[asyncio.Task[int]] = set()  # see _end_processes_if_ended
        self._idle = asyncio.Event()
        self._idle.set()

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None:
        """Advance a task from the journal, now. `created`: the task's row as its
        creation committed it (not read again)."""
        if task_id in self._running:
            self._again.add(task_id)
            return
        self._idle.clear()
        self._running[task_id] = asyncio.create_task(
            self._drive(task_id, created), name=f"task-{task_id}"
        )

    async def _drive(self, task_id: str, created: TaskRecord | None = None) -> None:
        k = self._host
        try:
            task = created if created is not None else await k.journal.tasks.get(task_id)
            priority = await self.priority(task) if k.admission.max_concurrent else 0

            async def queued() -> None:
                """Journaled Queued while it waits (seed 001, 1.1): a listing shows it, and
                a restart queues it again instead of starting it ahead of its turn."""
                now = await k.journal.tasks.get(task_id)
                if now.state.working and isinstance(now.payload, Working):
                    to = Queued(then=now.payload, priority=priority)
                    # the owner paused or cancelled it meanwhile: it stays as they left it
                    with contextlib.suppress(IllegalTransition):
                        await k.journal.tasks.transition(task_id, to, point="task_queued")

            async with k.admission.slot(task_id, priority, queued) as waited:
                # queued while it waited, or before a restart: admitted now
                now = await k.journal.tasks.get(task_id) if waited else task
                if isinstance(now.payload, Queued):  # admitted: TaskScheduled on the bus
                    await k.journal.tasks.transition(
                        task_id, now.payload.then, point="task_scheduled"
                    )
                runner = runner_for(task)  # by its kind, which a task keeps for good
                while True:
                    self._again.discard(task_id)
                    await runner.advance(task_id, k.services)  # it reads the row itself
                    if task_id not in self._again:
                        break
            await self._settle_pause(task_id)
            if task.kind is TaskKind.loop:
                await self.wake_parent(task_id)
                await k.learner.learn(task_id)
        except asyncio.CancelledError:
            raise
        except PfarError as exc:
            if k.journal.writer.failure is not None:
                self._write_failed(exc)
            else:
                log.error("task %s: %s", task_id, exc)
        finally:
            k.admission.forget(task_id)  # ended before taking the place it entered
            self._running.pop(task_id, None)
            self._end_processes_if_ended(task_id)
            if not self._running:
                self._idle.set()

    def _end_processes_if_ended(self, task_id: str) -> None:
        """A task that ended ends what its commands left running (nohup, setsid …); run
        apart, so a cancelled coroutine's cleanup never waits on it."""
        if not self._accepting():
            return  # shutting down: shutdown ends them all
        if not task_processes.may_have_left(task_id):
            return  # it started no command here: no walk through /proc for it
        ending = asyncio.create_task(
            task_processes.end_processes(self._host.journal, task_processes.terminal, task_id)
        )
        self._ending_processes.add(ending)
        ending.add_done_callback(self._ending_processes.discard)

    async def priority(self, task: TaskRecord) -> int:
        """Its template's priority, or a loop task's own (`pfar loop --priority`)."""
        k = self._host
        if task.kind is TaskKind.loop:
            settings = await k.journal.loops.settings(task.task_id)
            return settings.priority if settings is not None else 0
        tpl = k.templates.get(task.template_id) if task.kind is TaskKind.pipeline else None
        return tpl.priority if tpl is not None else 0

    async def enter_recovered(self, task_ids: list[str]) -> None:
        """The tasks recovery goes on with, into the queue together: by priority, then in
        recovery's order, the longest unmoved first (docs/config.md, "queued again in
        its turn")."""
        k = self._host
        entering = []
        for task_id in task_ids:
            entering.append((task_id, await self.priority(await k.journal.tasks.get(task_id))))
        k.admission.enter_all(entering)

    async def _settle_pause(self, task_id: str) -> None:
        """A runner that stopped short of a boundary (an error it logged) leaves a pause
        request standing on a task no coroutine holds any more: pause it now."""
        tasks = self._host.journal.tasks
        if pause_requested(await tasks.payload(task_id)):
            await tasks.request_pause(task_id, running=lambda: False)

    async def wake_parent(self, task_id: str) -> None:
        """A subtask that ended wakes the loop task blocked on it (seed 001, 6.4)."""
        journal = self._host.journal
        task = await journal.tasks.get(task_id)
        if task.kind is not TaskKind.loop or not task.state.terminal:
            return
        parent = (await journal.loops.settings(task_id)).parent_task_id
        if parent is not None:
            self.advance(parent)

    def is_running(self, task_id: str) -> bool:
        """A coroutine holds the task (it is being advanced, or is about to be)."""
        return task_id in self._running

    def running_ids(self) -> list[str]:
        return list(self._running)

    def count(self) -> int:
        return len(self._running)

    def coroutines(self) -> list[asyncio.Task[None]]:
        return list(self._running.values())

    def coroutine(self, task_id: str) -> asyncio.Task[None] | None:
        """The coroutine advancing `task_id`, if one is (awaiting it sees the task stop
        being driven: it ended, or it parked)."""
        return self._running.get(task_id)

    async def stop_coroutine(self, task_id: str) -> None:
        """Cancel the coroutine advancing `task_id` and wait until it has unwound (its
        tools end their processes as they unwind)."""
        self._again.discard(task_id)
        t = self._running.get(task_id)
        if t is None:
            return
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)

    async def processes_ended(self) -> None:
        """Wait for the ends of tasks' left processes under way (at shutdown)."""
        await asyncio.gather(*self._ending_processes, return_exceptions=True)

    async def wait_idle(self) -> None:
        """Wait until no task is being advanced (parked tasks do not count)."""
        while self._running:
            await self._idle.wait()
            await asyncio.sleep(0)

    async def wait_task(self, task_id: str) -> TaskRecord:
        """Wait until the task `task_id` ends or waits on the owner (`--wait`): while a
        coroutine advances it, or it waits on its subtasks (Blocked: it holds none then),
        other tasks do not count."""
        while True:
            if (running := self._running.get(task_id)) is not None:
                await asyncio.wait({running})
                continue
            task = await self._host.journal.tasks.get(task_id)
            if task.state is TaskState.Cancelling:  # the cancel request ends it, shortly
                await asyncio.sleep(0.05)
                continue
            others = set(self._running.values())
            if task.state is not TaskState.Blocked or not others:
                return task  # a Blocked task with nothing running waits on a question
            # what it waits on wakes it from a task's end (advance, before that task ends)
            await asyncio.wait(others, return_when=asyncio.FIRST_COMPLETED)

    async def wait_running(
        self, timeout: float, stop_now: asyncio.Event
    ) -> set[asyncio.Task[None]]:
        """Wait up to `timeout` for the running tasks, or until `stop_now`; those still
        running."""
        still = {t for t in self._running.values() if not t.done()}
        now = asyncio.create_task(stop_now.wait())
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while still and not stop_now.is_set():
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                done, _ = await asyncio.wait(
                    [*still, now], timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                still -= done
        finally:
            now.cancel()
        return still
