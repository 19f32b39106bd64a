"""The inference proxy: every model call of every task passes through here.

It shares one rate limit (requests and tokens per minute) across all tasks,
serves waiting calls highest priority first (FIFO within a priority), routes
a task whose data is above the cloud ceiling to the local provider (or refuses,
so the kernel can ask the owner for a `cloud_routing` approval), and accounts
for each call: tokens in and out, time to first token, total time, cost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import ProviderError
from .messages import ChatRequest, ChatResponse

LABELS = ("public", "internal", "sensitive", "secret")


class ChatProvider(Protocol):
    async def chat(self, request: ChatRequest) -> ChatResponse: ...


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call, as the journal keeps it for the task."""

    task_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    time_to_first_token: float | None
    total_time: float
    cost_usd: float
    queued_seconds: float
    granted_at: float = 0.0  # wall clock (seconds since the epoch) when the limiter let it go


class NeedsCloudRouting(ProviderError):
    """The task's data may not go to a cloud provider and no local provider is configured."""

    def __init__(self, task_id: str, label: str, ceiling: str) -> None:
        super().__init__(
            f"task {task_id}: its data is {label!r}, above the cloud ceiling {ceiling!r}, "
            "and no local provider is configured: the owner must approve cloud routing"
        )
        self.task_id, self.label, self.ceiling = task_id, label, ceiling


@dataclass(slots=True)
class _Waiter:
    priority: int
    seq: int
    tokens: int
    future: asyncio.Future[None] = field(compare=False)

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
        self._grants: deque[tuple[float, int]] = deque()  # (time, tokens)
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self._wake: asyncio.TimerHandle | None = None

    async def acquire(self, tokens: int, priority: int = 0) -> None:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(priority, next(self._seq), tokens, loop.create_future())
        heapq.heappush(self._waiting, waiter)
        self._grant()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
                heapq.heapify(self._waiting)
            raise

    def record_usage(self, extra_tokens: int) -> None:
        """Count tokens learnt only after the call (the answer's size)."""
        if extra_tokens > 0:
            self._grants.append((self._clock(), extra_tokens))

    def _grant(self) -> None:
        now = self._clock()
        while self._grants and now - self._grants[0][0] >= self._window:
            self._grants.popleft()
        while self._waiting:
            head = self._waiting[0]
            used = sum(t for _, t in self._grants)
            fits_tokens = used + head.tokens <= self._tpm or not self._grants
            if len(self._grants) >= self._rpm or not fits_tokens:
                break
            heapq.heappop(self._waiting)
            self._grants.append((now, head.tokens))
            if not head.future.done():
                head.future.set_result(None)
        if self._waiting and self._grants and self._wake is None:
            delay = max(0.0, self._grants[0][0] + self._window - now)
            self._wake = asyncio.get_running_loop().call_later(delay, self._rewake)

    def _rewake(self) -> None:
        self._wake = None
        self._grant()


class InferenceProxy:
    def __init__(
        self,
        providers: dict[str, ChatProvider],
        *,
        default: str,
        local: str | None = None,
        cloud_ceiling: str = "internal",
        limiter: RateLimiter | None = None,
        prices: dict[str, Price] | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        models: dict[str, str] | None = None,
    ) -> None:
        if default not in providers:
            raise ProviderError(f"the default provider {default!r} is not configured")
        if local is not None and local not in providers:
            raise ProviderError(f"the local provider {local!r} is not configured")
        if cloud_ceiling not in LABELS:
            raise ProviderError(f"cloud ceiling {cloud_ceiling!r} is not one of {LABELS}")
        self._providers, self._default, self._local = providers, default, local
        self._ceiling = cloud_ceiling
        self._limiter = limiter or RateLimiter(10**9, 10**12)
        self._prices = prices or {}
        self._on_call = on_call
        self._clock = clock
        # a provider that serves one model whatever the request names (a local server)
        self._models = models or {}

    def route(self, task_id: str, data_label: str) -> str:
        """The provider a task's data may go to."""
        if LABELS.index(data_label) <= LABELS.index(self._ceiling) or self._default == self._local:
            return self._default
        if self._local is None:
            raise NeedsCloudRouting(task_id, data_label, self._ceiling)
        return self._local

    async def chat(
        self,
        request: ChatRequest,
        *,
        task_id: str,
        priority: int = 0,
        data_label: str = "internal",
        cloud_approved: bool = False,
    ) -> ChatResponse:
        name = self._default if cloud_approved else self.route(task_id, data_label)
        if name in self._models:
            request = dataclasses.replace(request, model=self._models[name])
        estimate = _estimate_tokens(request)
        queued = self._clock()
        await self._limiter.acquire(estimate, priority)
        granted_at = time.time()
        waited = self._clock() - queued
        response = await self._providers[name].chat(request)
        self._limiter.record_usage(
            response.usage.input_tokens + response.usage.output_tokens - estimate
        )
        price = self._prices.get(response.model) or self._prices.get(request.model) or Price()
        cost = (
            response.usage.input_tokens * price.input + response.usage.output_tokens * price.output
        ) / 1_000_000
        if self._on_call is not None:
            self._on_call(
                CallRecord(
                    task_id,
                    name,
                    response.model,
                    response.usage.input_tokens,
                    response.usage.output_tokens,
                    response.time_to_first_token,
                    response.total_time,
                    cost,
                    waited,
                    granted_at,
                )
            )
        return response


def _estimate_tokens(request: ChatRequest) -> int:
    """A cheap upper-ish estimate before the call (4 characters a token)."""
    chars = len(request.system) + sum(len(m.text) for m in request.messages)
    return chars // 4 + 1
