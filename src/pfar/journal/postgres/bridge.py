"""Plain functions that await: the journal's SQL in a greenlet, its I/O on the event loop.

A family's SQL is synchronous code over a `Tx` (journal/tx.py). `run_sync(fn, ...)`
runs it in a greenlet; each statement of PostgreSQL's `Tx` hands its awaitable to
`await_io`, which switches back to the coroutine that awaits it on the event loop and
resumes the function with the result (or throws the error into it). The event loop is
never blocked, and SQLite, which runs the same functions directly, pays nothing.
SQLAlchemy's asyncio extension bridges its own sync core to async drivers this way.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import greenlet

T = TypeVar("T")


class _Bridged(greenlet.greenlet):
    """A greenlet running journal SQL; `parent` is the coroutine's greenlet, which awaits."""


def await_io(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` from SQL running under `run_sync`."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("PostgreSQL's journal SQL runs only under run_sync (a bug)")
    assert current.parent is not None
    return cast(T, current.parent.switch(awaitable))


async def run_sync(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """`fn(*args, **kw)`, each `await_io` inside it awaited here."""
    bridged = _Bridged(fn, greenlet.getcurrent())
    request = bridged.switch(*args, **kw)
    while not bridged.dead:
        try:
            value = await request
        except BaseException:
            request = bridged.throw(*sys.exc_info())
        else:
            request = bridged.switch(value)
    return cast(T, request)
