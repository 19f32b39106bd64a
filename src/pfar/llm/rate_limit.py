"""One rate limit shared by every model call: requests and tokens per sliding minute,
granted highest priority first (FIFO within a priority). An answer's tokens count
against the token limit as they are known (`record_usage`)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Waiter:
    priority: int
    seq: int
    tokens: int
    future: asyncio.Future[float] = field(compare=False)

    def __lt__(self, other: _Waiter) -> bool:  # higher priority first, then arrival order
        return (-self.priority, self.seq) < (-other.priority, other.seq)


class RateLimiter:
    """Requests and tokens per sliding minute, granted in priority order."""

    def __init__(
        self,
        requests_per_minute: int,
        tokens_per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        window: float = 60.0,
    ) -> None:
        self._rpm, self._tpm, self._clock, self._window = (
            requests_per_minute,
            tokens_per_minute,
            clock,
            window,
        )
        self._requests: deque[float] = deque()  # when each call in the window was let go
        # tokens in the window: each grant's estimate and each answer's size, as they come
        self._tokens: deque[tuple[float, int]] = deque()
        self._used = 0  # their sum, kept as they come and go (never summed per grant)
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self._wake: asyncio.TimerHandle | None = None

    async def acquire(self, tokens: int, priority: int = 0) -> float:
        """Wait for a grant; return its wall-clock time (when the limiter let it go, not
        when the waiting coroutine next ran: under load those differ)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(priority, next(self._seq), tokens, loop.create_future())
        heapq.heappush(self._waiting, waiter)
        self._grant()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
                heapq.heapify(self._waiting)
            raise

    def pressure(self) -> str | None:
        """Why a new task should not start now (seed 001, 1.2: no rate headroom), or
        None: model calls already wait for this minute's budget."""
        if not self._waiting:
            return None
        return (
            f"rate limit: {len(self._waiting)} model call(s) wait for the provider's budget "
            f"({self._rpm:,} requests, {self._tpm:,} tokens a minute)"
        )

    def record_usage(self, extra_tokens: int) -> None:
        """Count tokens learnt only after the call (the answer's size)."""
        if extra_tokens > 0:  # tokens, not a request: it does not count against the rpm
            self._tokens.append((self._clock(), extra_tokens))
            self._used += extra_tokens

    def _grant(self) -> None:
        now = self._clock()
        while self._requests and now - self._requests[0] >= self._window:
            self._requests.popleft()
        while self._tokens and now - self._tokens[0][0] >= self._window:
            self._used -= self._tokens.popleft()[1]
        while self._waiting:
            head = self._waiting[0]
            # a call bigger than the whole budget still goes, alone in its window
            fits_tokens = self._used + head.tokens <= self._tpm or not self._tokens
            if len(self._requests) >= self._rpm or not fits_tokens:
                break
            heapq.heappop(self._waiting)
            self._requests.append(now)
            self._tokens.append((now, head.tokens))
            self._used += head.tokens
            if not head.future.done():
                head.future.set_result(time.time())
        if self._waiting and self._wake is None and (self._requests or self._tokens):
            oldest = min(
                self._requests[0] if self._requests else now,
                self._tokens[0][0] if self._tokens else now,
            )
            delay = max(0.0, oldest + self._window - now)
            self._wake = asyncio.get_running_loop().call_later(delay, self._rewake)

    def _rewake(self) -> None:
        self._wake = None
        self._grant()
