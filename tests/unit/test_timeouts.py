"""`bounded`: a coroutine awaited under a timeout, its first stretch run before any timer
is armed. What it must keep of `async with asyncio.timeout(s): await coro`: the result,
the errors, the timeout (counted from the call), cancellation from outside, the task and
the context the coroutine runs in."""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import pytest

from pfar.timeouts import bounded


class CountingLoop(asyncio.SelectorEventLoop):
    """The test's own loop: counts the timers armed on it."""

    timers = 0

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def run(coro: Any) -> tuple[Any, int]:
    loop = CountingLoop()
    try:
        return loop.run_until_complete(coro), loop.timers
    finally:
        loop.close()


async def finishes_at_once(x: int) -> int:
    return x * 2


def test_a_coroutine_that_never_waits_costs_no_timer() -> None:
    result, timers = run(bounded(finishes_at_once(21), 60.0))
    assert (result, timers) == (42, 0)


def test_a_coroutine_that_waits_goes_on_under_a_timer() -> None:
    async def waits() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return "done"

    result, timers = run(bounded(waits(), 60.0))
    assert result == "done" and timers >= 1


def test_past_its_time_it_is_cancelled_and_the_caller_sees_a_timeout() -> None:
    cleaned: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("finally ran")

    with pytest.raises(TimeoutError):
        run(bounded(slow(), 0.05))
    assert cleaned == ["finally ran"]


def test_its_first_stretch_counts_against_its_time() -> None:
    """0.3 s of the 0.35 s are gone when it first waits: a wait of 0.15 s is cut short
    (had the timer started only then, it would have finished)."""

    async def busy_then_waits() -> str:
        time.sleep(0.3)  # noqa: ASYNC251 - it blocks on purpose: no timeout can cut it short
        await asyncio.sleep(0)
        await asyncio.sleep(0.15)
        return "finished"

    with pytest.raises(TimeoutError):
        run(bounded(busy_then_waits(), 0.35))


@pytest.mark.parametrize("waits_first", [False, True])
def test_its_errors_reach_the_caller(waits_first: bool) -> None:
    async def fails() -> None:
        if waits_first:
            await asyncio.sleep(0)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        run(bounded(fails(), 60.0))


def test_a_cancellation_from_outside_reaches_it() -> None:
    seen: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def caller() -> None:
        task = asyncio.create_task(bounded(waits(), 60.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(caller())
    assert seen == ["cancelled"]


def test_it_runs_in_its_callers_task_and_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var")

    async def looks() -> tuple[Any, str, Any, str]:
        first = (asyncio.current_task(), var.get())
        await asyncio.sleep(0)
        return (*first, asyncio.current_task(), var.get())

    async def caller() -> None:
        var.set("the caller's")
        me = asyncio.current_task()
        assert await bounded(looks(), 60.0) == (me, "the caller's", me, "the caller's")

    run(caller())


def test_an_awaitable_that_is_no_coroutine_is_awaited_under_its_timeout() -> None:
    async def caller() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        loop.call_later(0.01, fut.set_result, 7)
        assert await bounded(fut, 60.0) == 7
        with pytest.raises(TimeoutError):
            await bounded(loop.create_future(), 0.02)

    run(caller())


def test_no_limit_is_no_limit() -> None:
    async def waits() -> str:
        await asyncio.sleep(0.01)
        return "done"

    assert run(bounded(waits(), None)) == ("done", 1)  # the sleep's own timer only


def test_outside_a_task_the_timeout_refuses_and_the_coroutine_is_ended() -> None:
    ended: list[str] = []
    raised: list[BaseException] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            ended.append("ended")

    def drive_by_hand() -> None:  # a loop callback: a running loop, but no task
        try:
            bounded(waits(), 1.0).send(None)
        except RuntimeError as exc:
            raised.append(exc)

    async def main() -> None:
        asyncio.get_running_loop().call_soon(drive_by_hand)
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert ended == ["ended"]
    assert raised and "inside a task" in str(raised[0])
