"""`[scheduler] max_concurrent` through a real kernel: no more tasks run at once than it
allows, the others wait in `pfar queue`'s order (priority, then arrival) and each runs
when a slot frees; a task parked on the owner holds no slot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pfar.config import Config
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply

from ..support import make_home


def test_at_most_max_concurrent_run_and_the_rest_wait_in_order(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        config='[scheduler]\nmax_concurrent = 2\n[loop]\ntools = ["Read"]\n',
    )
    gate = asyncio.Event()
    in_flight = 0
    most = 0
    answered: list[str] = []

    async def model(request: ChatRequest) -> ChatResponse:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await gate.wait()
        finally:
            in_flight -= 1
        answered.append(request.messages[0].text)
        return reply(request, "done")

    async def scene() -> None:
        kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(model))
        await kernel.start()
        op = Operator(kernel)
        try:
            ids = []
            for n in range(6):
                started = await op.start_loop(f"job {n}", str(tmp_path), once=True)
                ids.append(started.task_id)
            for _ in range(200):
                if len(await op.queue()) == 4:
                    break
                await asyncio.sleep(0.01)
            waiting = await op.queue()
            assert [w.task_id for w in waiting] == ids[2:]
            assert [w.position for w in waiting] == [1, 2, 3, 4]
            assert "2 of 2 running" in waiting[0].reason
            # journaled as Queued while they wait: listings and a restart see it
            for task_id in ids[2:]:
                assert (await op.task(task_id)).state is TaskState.Queued
            assert {t.state for t in await op.tasks()} == {TaskState.Executing, TaskState.Queued}
            for _ in range(200):  # the queue is known at creation: let the two reach the model
                if in_flight == 2:
                    break
                await asyncio.sleep(0.01)
            gate.set()
            await kernel.wait_idle()
            for task_id in ids:
                assert (await op.task(task_id)).state is TaskState.Completed
            kinds = {
                task_id: [
                    e.kind for e in await kernel.journal.events.bus(0, 1000) if e.task_id == task_id
                ]
                for task_id in ids
            }
            for task_id in ids[:2]:
                assert "TaskQueued" not in kinds[task_id]  # a free slot: never queued
            for task_id in ids[2:]:
                # created straight into the queue: never said to have started
                assert kinds[task_id][:3] == ["TaskCreated", "TaskQueued", "TaskScheduled"]
            assert await op.queue() == []
            kinds = [e.kind for e in await op.events(limit=1000)]
            assert kinds.count("TaskScheduled") == 4  # the ones that waited
            # each given its slot in the queue's order (the journal says when; which of
            # two running tasks reaches its model first is the event loop's to choose)
            scheduled = [
                e.task_id
                for e in await kernel.journal.events.bus(0, 1000)
                if e.kind == "TaskScheduled"
            ]
            assert scheduled == ids[2:]
        finally:
            await kernel.shutdown()

    asyncio.run(scene())
    assert most == 2
    assert sorted(answered[2:]) == ["job 2", "job 3", "job 4", "job 5"]  # the waiters


def test_a_loop_tasks_priority_orders_the_queue(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home", config='[scheduler]\nmax_concurrent = 1\n[loop]\ntools = ["Read"]\n'
    )
    gate = asyncio.Event()

    async def model(request: ChatRequest) -> ChatResponse:
        await gate.wait()
        return reply(request, "done")

    async def scene() -> None:
        kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(model))
        await kernel.start()
        op = Operator(kernel)
        try:
            await op.start_loop("first", str(tmp_path), once=True)
            low = await op.start_loop("low", str(tmp_path), once=True, priority=-5)
            high = await op.start_loop("high", str(tmp_path), once=True, priority=50)
            mid = await op.start_loop("mid", str(tmp_path), once=True)
            for _ in range(200):
                if len(await op.queue()) == 3:
                    break
                await asyncio.sleep(0.01)
            waiting = await op.queue()
            assert [w.task_id for w in waiting] == [high.task_id, mid.task_id, low.task_id]
            assert [w.priority for w in waiting] == [50, 0, -5]
            gate.set()
            await kernel.wait_idle()
        finally:
            await kernel.shutdown()

    asyncio.run(scene())
