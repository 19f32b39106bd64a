"""Admission decided ahead of a task's coroutine: `enter` at creation holds the place it
decided, `enter_all` after a restart admits by priority whatever order the tasks came
in, and `forget` leaves neither a held slot nor a ghost in the queue."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.kernel.admission import Admission


@settings(max_examples=40, deadline=None)
@given(cap=st.integers(1, 3), priorities=st.lists(st.integers(-3, 3), min_size=1, max_size=8))
def test_after_a_restart_the_highest_priorities_take_the_slots(
    cap: int, priorities: list[int]
) -> None:
    async def scene() -> None:
        admission = Admission(cap)
        tasks = [(f"t{n}", p) for n, p in enumerate(priorities)]
        admission.enter_all(tasks)
        ranked = sorted(range(len(tasks)), key=lambda n: (-priorities[n], n))
        admitted = {f"t{n}" for n in ranked[:cap]}
        assert admission.running == len(admitted)
        assert [w.task_id for w in admission.waiting()] == [f"t{n}" for n in ranked[cap:]]
        # the admitted ones never count as having waited; the others do
        for task_id, priority in tasks:
            if task_id in admitted:
                async with admission.slot(task_id, priority) as waited:
                    assert not waited
                break

    asyncio.run(scene())


def test_enter_decides_at_once_and_the_slot_keeps_the_decision() -> None:
    async def scene() -> None:
        admission = Admission(1)
        assert admission.enter("a", 0)
        assert not admission.enter("b", 50)  # the slot is a's, though b ranks higher
        assert [w.task_id for w in admission.waiting()] == ["b"]
        heard: list[str] = []

        async def queued() -> None:
            heard.append("queued")

        async with admission.slot("a", 0) as waited:
            assert not waited
            b = asyncio.create_task(_hold(admission, "b", queued))
            await asyncio.sleep(0)
            assert not b.done()
        assert await b  # b waited, and was told it was queued
        assert heard == ["queued"]
        assert admission.running == 0

    asyncio.run(scene())


async def _hold(admission: Admission, task_id: str, queued: Callable[[], Awaitable[None]]) -> bool:
    async with admission.slot(task_id, 0, queued) as waited:
        return waited


def test_forget_hands_on_a_slot_and_removes_a_waiter() -> None:
    async def scene() -> None:
        admission = Admission(1)
        assert admission.enter("a", 0)
        assert not admission.enter("b", 0)
        assert not admission.enter("c", 0)
        admission.forget("b")  # never created: out of the queue
        assert [w.task_id for w in admission.waiting()] == ["c"]
        admission.forget("a")  # its coroutine ended before its slot: c is let in
        assert admission.waiting() == []
        assert admission.running == 1
        admission.forget("a")  # twice: nothing more
        assert admission.running == 1

    asyncio.run(scene())
