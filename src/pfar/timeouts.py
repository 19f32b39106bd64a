"""Awaiting a coroutine under a timeout, arming no timer for one that never waits.

asyncio cancels a coroutine only where it awaits, so the stretch a coroutine runs
before its first await was never bounded by a timeout; only what comes after is.
`bounded` runs that first stretch at once, as Python 3.12's eager tasks do: a
coroutine that finishes in it (a scripted step, a small read) costs no timer at
all, and one that waits goes on under what is left of its time. Arming and
cancelling a timer for every step of a task was a measured share of a step's cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


async def bounded(coro: Awaitable[T], seconds: float | None) -> T:
    """`await coro`, raising TimeoutError once `seconds` have passed since the call
    (None: no limit)."""
    if seconds is None:
        return await coro
    if not isinstance(coro, Coroutine):  # a future, say: nothing runs before it is awaited
        async with asyncio.timeout(seconds):
            return await coro
    started = time.monotonic()
    try:
        waits_on = coro.send(None)
    except StopIteration as done:  # it finished without waiting on anything
        return done.value  # type: ignore[no-any-return]
    try:
        async with asyncio.timeout(seconds - (time.monotonic() - started)):
            rest: T = await _Rest(coro, waits_on)
            return rest
    finally:
        coro.close()  # ended already, unless the timeout could not begin (no task)


class _Rest:
    """The rest of a coroutine whose first stretch already ran and yielded `waits_on`
    (what its task must wait for): `yield from` it, from where it stopped."""

    __slots__ = ("_coro", "_waits_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waits_on: Any) -> None:
        self._coro = coro
        self._waits_on = waits_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waits_on = self._coro, self._waits_on
        while True:
            thrown: BaseException | None = None
            try:
                sent = yield waits_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation (the timeout's) and the like
                thrown = exc
            # thrown in outside the handler above, as `yield from` does: the coroutine
            # does not see it as the exception being handled
            try:
                waits_on = coro.send(sent) if thrown is None else coro.throw(thrown)
            except StopIteration as done:
                return done.value
            finally:
                thrown = None
