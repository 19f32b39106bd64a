"""Running out of file descriptors is weather, not a crash.

A flood of idle connections (to a listener or the control socket) can use up the
process's descriptors. Then everything that opens a file fails with EMFILE for a
while: that must not stop the kernel, and must not write a log line per failure.

* `raise_limit` lifts the soft RLIMIT_NOFILE to its hard limit once, at start;
* `share` is how many connections one listener may hold: a quarter of the limit at
  most, so that a flooded listener leaves descriptors for the journal and the rest;
* `kept` runs a kernel duty again (after a backoff) when it failed for lack of
  descriptors, logging that at most once a minute;
* `AcceptErrors` is the event loop's exception handler for the errors asyncio's
  accept reports (CPython logs one with its traceback for each failed `accept()`, up
  to the listen backlog at once, every second): one line a minute, with a count.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("pfar.kernel")

OUT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
LOG_EVERY = 60.0  # seconds between two lines about the same shortage
FIRST_WAIT = 0.5  # a duty's first retry; doubles up to LONGEST_WAIT
LONGEST_WAIT = 30.0
# a listener's listen backlog: asyncio accepts up to this many connections at one
# wake-up before any is refused and closed, so it bounds a flood's burst of descriptors
ACCEPT_BURST = 32


def out_of_descriptors(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in OUT_OF


def raise_limit() -> tuple[int, int]:
    """Lift the soft descriptor limit to the hard one; the (old, new) soft limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # e.g. over fs.nr_open: keep what we have
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)
            return soft, soft
        return soft, target
    return soft, soft


def share(most: int) -> int:
    """Connections one listener may hold: `most`, or a quarter of the descriptor limit
    when that is less (at least 4)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return most
    return max(4, min(most, soft // 4))


class Every:
    """Says whether a line is due: at most one each `seconds`, counting the ones held back."""

    def __init__(self, seconds: float = LOG_EVERY) -> None:
        self._seconds = seconds
        self._last: float | None = None
        self.held = 0

    def due(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self._seconds:
            self.held += 1
            return False
        self._last = now
        return True

    def take_held(self) -> int:
        held, self.held = self.held, 0
        return held


async def kept(name: str, start: Callable[[bool], Awaitable[None]]) -> None:
    """Run the duty `start(again)` (again: False the first time); when it fails for
    lack of descriptors, start it again after a backoff. Any other end is its own."""
    again = False
    failures = 0
    lines = Every()
    while True:
        began = time.monotonic()
        try:
            await start(again)
            return
        except OSError as exc:
            if not out_of_descriptors(exc):
                raise
            if time.monotonic() - began > LONGEST_WAIT:
                failures = 0  # it ran a good while: this is a new shortage
            failures += 1
            wait = min(LONGEST_WAIT, FIRST_WAIT * 2 ** (failures - 1))
            if lines.due():
                held = lines.take_held()
                more = f" ({held} more since the last line)" if held else ""
                log.error(
                    "kernel duty %s: %s; trying again in %gs%s (connections flooding a "
                    "listener? the open-file limit is %d)",
                    name,
                    exc.strerror or exc,
                    wait,
                    more,
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                )
            again = True
            await asyncio.sleep(wait)


class AcceptErrors:
    """The loop's exception handler: accept errors from lack of descriptors are logged
    at most once a minute; everything else goes to the handler that was there."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._previous = loop.get_exception_handler()
        self._lines = Every()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.set_exception_handler(self)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if exc is not None and out_of_descriptors(exc) and "accept" in context.get("message", ""):
            if self._lines.due():
                held = self._lines.take_held()
                more = f" ({held} more since the last line)" if held else ""
                log.error(
                    "cannot accept a connection: %s; new connections wait%s (the open-file "
                    "limit is %d)",
                    exc.strerror or exc,
                    more,
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                )
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)
