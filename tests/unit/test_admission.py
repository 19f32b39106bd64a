"""Admission: never more than `max_concurrent` at once, the highest priority first, the
oldest first among equals, and a cancelled waiter leaves no hole."""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.kernel.admission import Admission
from pfar.llm.proxy import RateLimiter


@settings(max_examples=30, deadline=None)
@given(
    cap=st.integers(1, 4),
    priorities=st.lists(st.integers(-3, 3), min_size=1, max_size=30),
    seed=st.integers(0, 1000),
)
def test_the_cap_holds_and_waiters_go_by_priority_then_arrival(
    cap: int, priorities: list[int], seed: int
) -> None:
    async def scene() -> None:
        admission = Admission(cap)
        gate = asyncio.Event()
        running = 0
        most = 0
        order: list[int] = []

        async def task(n: int, priority: int) -> None:
            nonlocal running, most
            async with admission.slot(f"t{n}", priority):
                running += 1
                most = max(most, running)
                order.append(n)
                await gate.wait()
                await asyncio.sleep(random.Random(seed + n).random() / 1000)
                running -= 1

        jobs = [asyncio.create_task(task(n, p)) for n, p in enumerate(priorities)]
        await asyncio.sleep(0.01)  # all have arrived: the first `cap` run, the rest wait
        assert [w.task_id for w in admission.waiting()] == [
            f"t{n}" for n in sorted(range(cap, len(priorities)), key=lambda n: (-priorities[n], n))
        ]
        gate.set()
        await asyncio.gather(*jobs)
        assert most <= cap
        waited = order[cap:]
        assert waited == sorted(waited, key=lambda n: (-priorities[n], n))
        assert admission.running == 0 and admission.waiting() == []

    asyncio.run(scene())


def test_a_cancelled_waiter_leaves_no_hole_and_zero_means_no_limit() -> None:
    async def scene() -> None:
        admission = Admission(1)
        gate = asyncio.Event()

        async def hold(name: str) -> None:
            async with admission.slot(name):
                await gate.wait()

        first = asyncio.create_task(hold("a"))
        second = asyncio.create_task(hold("b"))
        third = asyncio.create_task(hold("c"))
        await asyncio.sleep(0.01)
        second.cancel()
        await asyncio.sleep(0.01)
        assert [w.task_id for w in admission.waiting()] == ["c"]
        gate.set()
        await asyncio.gather(first, third)
        assert admission.running == 0
        free = Admission(0)
        async with free.slot("x") as waited_x, free.slot("y") as waited_y:
            assert not waited_x and not waited_y and free.running == 2

    asyncio.run(scene())


def test_no_task_starts_while_model_calls_wait_for_the_rate_limit() -> None:
    """Seed 001, 1.2: a free slot is not enough; the inference proxy's limiter must have
    headroom (no model call waiting for the provider's budget)."""

    async def scene() -> None:
        limiter = RateLimiter(1, 10**9, clock=lambda: 0.0)  # one request a minute
        await limiter.acquire(10)  # this minute's request is spent
        starved = asyncio.create_task(limiter.acquire(10))  # a running task's call waits
        await asyncio.sleep(0)
        assert limiter.pressure() is not None
        admission = Admission(4, limiter.pressure)
        started = asyncio.Event()

        async def task() -> None:
            async with admission.slot("t1"):
                started.set()

        job = asyncio.create_task(task())
        await asyncio.sleep(0.05)
        assert not started.is_set()
        (waiting,) = admission.waiting()
        assert waiting.reason.startswith("rate limit: 1 model call(s) wait")
        starved.cancel()  # the call gave up: the limiter has headroom again
        await asyncio.wait_for(started.wait(), timeout=5)
        await job
        assert admission.running == 0 and admission.waiting() == []

    asyncio.run(scene())
