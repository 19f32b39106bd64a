"""A circuit breaker per provider: closed → open after N failures in a row → half-open
after `open_seconds`, where one call (the probe) goes through; its success closes the
breaker, its failure opens it again for another `open_seconds`.

What counts as a failure: a call that failed on the provider's side after the retries
its error table allows (`retry.ProviderCallFailed`) of a kind that says the provider,
not the request, is at fault: a timeout or a connection that failed, a 5xx, a 529 /
overloaded, a 429 still refused after its waits, a stream cut off too early. A 400 (the
request is wrong) or a 401 (the key is wrong) is an answer: the provider is up, and it
counts as a success. Each attempt's retries stay the error table's; the breaker only
decides where the next call goes.

The state lives in memory only and every breaker starts closed when the kernel starts
(the persistence spec: "memory only, reset to healthy on restart"): a request made
again after a crash tries the primary provider first.

The clock is injected, so the states can be tested without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from .retry import ErrorKind, ProviderCallFailed

# the kinds of failure that count against the provider (see the module's docstring)
COUNTED = frozenset(
    {
        ErrorKind.timeout,
        ErrorKind.server,
        ErrorKind.overloaded,
        ErrorKind.rate_limited,
        ErrorKind.stream_cut,
    }
)


def counts(exc: BaseException) -> bool:
    """Whether a call's error counts against its provider's breaker."""
    return isinstance(exc, ProviderCallFailed) and exc.kind in COUNTED


class BreakerState(StrEnum):
    closed = "closed"
    open = "open"
    half_open = "half_open"


class Change(StrEnum):
    """What a call's outcome did to the breaker: the owner is told of each, once."""

    down = "down"  # closed → open
    up = "up"  # half-open → closed (the probe answered)


@dataclass(frozen=True, slots=True)
class Health:
    """A provider went down or came back; `detail` is the last error, when down."""

    provider: str
    change: Change
    failures: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class BreakerView:
    """A breaker as the owner is shown it (`pfar providers`)."""

    state: BreakerState
    failures: int  # counted failures in a row
    retry_in: float | None  # seconds until a call may go (0: now; None: a probe is out)
    last_error: str  # the last counted failure's words ("" once it answered)


class CircuitBreaker:
    """One provider's breaker. `admit()` before a call (False: do not call it now),
    then exactly one of `succeeded()`, `failed()` or `abandoned()`."""

    def __init__(
        self,
        provider: str,
        *,
        failures: int = 5,
        open_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self._threshold, self._open_seconds, self._clock = failures, open_seconds, clock
        self._failures = 0
        self._last_error = ""
        self._opened_at: float | None = None
        self._probing = False
        self._changed = asyncio.Event()

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.closed
        if self._probing or self._clock() - self._opened_at >= self._open_seconds:
            return BreakerState.half_open
        return BreakerState.open

    def admit(self) -> bool:
        """Whether a call may go to the provider now. In half-open, only the first call
        is let through (the probe); the others wait for its outcome."""
        state = self.state
        if state is BreakerState.closed:
            return True
        if state is BreakerState.half_open and not self._probing:
            self._probing = True
            return True
        return False

    def retry_in(self) -> float | None:
        """Seconds until a call may be admitted (0: now); None while a probe is out
        (its outcome decides)."""
        if self._opened_at is None:
            return 0.0
        if self._probing:
            return None
        return max(0.0, self._opened_at + self._open_seconds - self._clock())

    def succeeded(self) -> Health | None:
        """The provider answered; a Health when that brought it back."""
        was_open = self._opened_at is not None
        self._failures, self._opened_at, self._probing = 0, None, False
        self._last_error = ""
        if not was_open:
            return None  # closed it was and stays: no one waits on a change
        self._wake()
        return Health(self.provider, Change.up, 0)

    def failed(self, detail: str) -> Health | None:
        """A counted failure; a Health when it opened the breaker (not when a probe
        failed: the provider was down already)."""
        self._failures += 1
        self._last_error = detail
        if self._opened_at is not None:  # the probe failed (or a call let in before)
            self._opened_at, self._probing = self._clock(), False
            self._wake()
            return None
        if self._failures < self._threshold:
            return None
        self._opened_at = self._clock()
        self._wake()
        return Health(self.provider, Change.down, self._failures, detail)

    def view(self) -> BreakerView:
        return BreakerView(self.state, self._failures, self.retry_in(), self._last_error)

    def abandoned(self) -> None:
        """The call ended with no word on the provider (cancelled, or an error of ours):
        a probe's turn goes to the next call."""
        if self._probing:
            self._probing = False
            self._wake()

    async def changed(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the next change of state."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
