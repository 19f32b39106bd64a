"""The inference proxy: every model call of every task passes through here.

It is the one chat interface runners see: `chat(request, task_id=...)` sends a
conversation with tool schemas and returns the whole answer (text, tool calls, stop
reason, usage), streaming typed events (`events`) to `on_event` as they arrive;
`stream(...)` gives the same events as an async iterator. Behind it sits any
`ChatModel`: the Anthropic and OpenAI-compatible providers, or a scripted model.

It shares one rate limit (requests and tokens per minute) across all tasks,
serves waiting calls highest priority first (FIFO within a priority), routes
a task whose data is above the cloud ceiling to the local provider (or refuses,
so the kernel can ask the owner for a `cloud_routing` approval), and accounts
for each call: tokens in and out, time to first token, total time, cost. It
also knows the configured model of each tier (`model_for`), the answer's token
budget (`max_tokens`), and whether its models are remote (a runner journals a
request to a remote model before it goes out).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import ProviderError
from . import tokens
from .breaker import BreakerState, BreakerView
from .events import ChatEvent, EventSink, Finished
from .failover import Failover
from .messages import ChatRequest, ChatResponse
from .price_table import Price, price_of
from .rate_limit import RateLimiter

LABELS = ("public", "internal", "sensitive", "secret")

# Price is price_table's, named here too: where the proxy's callers have imported it
__all__ = [
    "LABELS",
    "CallRecord",
    "ChatModel",
    "InferenceProxy",
    "NeedsCloudRouting",
    "Price",
    "RateLimiter",
]


class ChatModel(Protocol):
    """A model that chats: the whole answer, with its events streamed to `on_event` (ending
    in `Finished`) when one is given."""

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse: ...


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
    priced: bool = True  # False: no price for its model, so cost_usd is unknown, not 0


class NeedsCloudRouting(ProviderError):
    """The task's data may not go to a cloud provider and no local provider is configured."""

    code = "needs_cloud_routing"

    def __init__(self, task_id: str, label: str, ceiling: str) -> None:
        super().__init__(
            f"task {task_id}: its data is {label!r}, above the cloud ceiling {ceiling!r}, "
            "and no local provider is configured: the owner must approve cloud routing"
        )
        self.task_id, self.label, self.ceiling = task_id, label, ceiling


class InferenceProxy:
    def __init__(
        self,
        providers: dict[str, ChatModel],
        *,
        default: str,
        local: str | None = None,
        cloud_ceiling: str = "internal",
        limiter: RateLimiter | None = None,
        prices: dict[str, Price] | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        models: dict[str, str] | None = None,
        model: str = "default",
        tiers: dict[str, str] | None = None,
        thinking: dict[str, int] | None = None,
        max_tokens: int = 4096,
        remote: bool = True,
        failover: Failover | None = None,
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
        self._priced: dict[str, Price | None] = {}
        self._on_call = on_call
        # awaited before each call is let through (the spend caps): it raises to hold the
        # call, given the task and what the call may cost at most, in tokens and dollars
        self.gate: Callable[[str, int, Callable[[], float]], Awaitable[None]] | None = None
        self._clock = clock
        # a provider that serves one model whatever the request names (a local server)
        self._models = models or {}
        self._model = model
        self._tiers = {k: v for k, v in (tiers or {}).items() if v}
        self._thinking = dict(thinking or {})
        self.max_tokens = max_tokens
        # the models answer from the far side: a runner journals each request before it
        # goes out (False for a scripted model, which answers in-process)
        self.remote = remote
        # each provider's circuit breaker and the tiers' fallbacks (none: the breaker never
        # opens, every call goes where it is routed)
        self.failover = failover or Failover(providers, primary=default, failures=10**9)

    def price(self, model: str) -> Price | None:
        """A model's price: `[llm.prices]`, else pfar's table (price_table.py); None: unknown
        (kept per model: a call looks up two or three)."""
        if model not in self._priced:
            self._priced[model] = price_of(model, self._prices)
        return self._priced[model]

    def headroom(self) -> str | None:
        """None when a new task may start; else why not (the rate limit is spent)."""
        return self._limiter.pressure()

    def model_for(self, tier: str) -> str:
        """The model of a tier ("cheap", "worker", "planner"); the configured model when unset."""
        return self._tiers.get(tier, self._model)

    def thinking_for(self, tier: str) -> int | None:
        """The thinking budget of a tier's calls (`[llm.tiers.<tier>] thinking`); None:
        its calls do not think."""
        return self._thinking.get(tier)

    def below_ceiling(self, data_label: str) -> bool:
        """Data with this label may go to any cloud provider (a fallback's too)."""
        return LABELS.index(data_label) <= LABELS.index(self._ceiling)

    def routes_freely(self, data_label: str) -> bool:
        """Data with this label goes to the default provider without the owner's say."""
        return self.below_ceiling(data_label) or self._default == self._local

    def health(self) -> list[tuple[str, str, BreakerView]]:
        """Each provider, its role (default, local or fallback) and its breaker now."""
        roles = {self._default: "default"}
        if self._local is not None:
            roles.setdefault(self._local, "local")
        return [
            (name, roles.get(name, "fallback"), self.failover.breakers[name].view())
            for name in self._providers
        ]

    def route(self, task_id: str, data_label: str) -> str:
        """The provider a task's data may go to."""
        if self.routes_freely(data_label):
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
        on_event: EventSink | None = None,
    ) -> ChatResponse:
        """One model call for `task_id`: routed by its data label, let through by the
        shared limit (higher `priority` first), accounted once it answered."""
        name = self._default if cloud_approved else self.route(task_id, data_label)
        if name in self._models:
            request = dataclasses.replace(request, model=self._models[name])
        # everything the request sends: its tool results are most of a loop's context
        estimate = tokens.input_tokens(request)
        alone = not self.below_ceiling(data_label)
        if self.gate is not None:
            most = functools.partial(self._most, name, request, estimate, alone)
            await self.gate(task_id, estimate + request.max_tokens, most)
        queued = self._clock()
        granted_at = await self._limiter.acquire(estimate, priority)
        waited = self._clock() - queued
        # the provider that answered: a fallback's while the routed one is down, unless
        # the data is above the cloud ceiling: it goes where it was routed (or approved)
        # and nowhere else, so it waits for that provider
        name, response = await self.failover.chat(name, request, on_event, alone=alone)
        self._limiter.record_usage(
            response.usage.input_tokens + response.usage.output_tokens - estimate
        )
        price = self.price(response.model) or self.price(request.model)
        usage = response.usage
        cost = price.cost(usage.input_tokens, usage.output_tokens) if price is not None else 0.0
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
                    priced=price is not None,
                )
            )
        return response

    def _most(self, provider: str, request: ChatRequest, estimate: int, alone: bool) -> float:
        """What the call may cost at most: its input and its whole `max_tokens` out, at
        the price of the dearest route it may take (failover comes after the gate). A
        model with no price adds nothing (its cost is unknown, as its calls' are)."""
        routes = self.failover.routes(provider, request, alone=alone)
        prices = (self.price(r.model) for r in routes)
        costs = [p.cost(estimate, request.max_tokens) for p in prices if p is not None]
        return max(costs, default=0.0)

    async def count_tokens(
        self, request: ChatRequest, *, data_label: str = "internal"
    ) -> tokens.TokenCount:
        """The request's input tokens as the provider it would go to counts them; the
        estimate when that provider cannot count, is down (its breaker is not closed), or
        may not see the data (the count sends the conversation)."""
        try:
            name = self.route("", data_label)
        except NeedsCloudRouting:
            return tokens.estimate(request)
        if name in self._models:
            request = dataclasses.replace(request, model=self._models[name])
        if self.failover.breakers[name].state is not BreakerState.closed:
            return tokens.estimate(request)
        return await tokens.count(self._providers[name], request)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        request: ChatRequest,
        *,
        task_id: str,
        priority: int = 0,
        data_label: str = "internal",
        cloud_approved: bool = False,
    ) -> AsyncIterator[AsyncIterator[ChatEvent]]:
        """`chat`'s events as an async iterator, ending with `Finished`; a failed call
        raises from the iterator. Leaving the block early cancels the call.

            async with proxy.stream(request, task_id=t) as events:
                async for event in events:
                    ...
        """
        queue: asyncio.Queue[ChatEvent | Exception] = asyncio.Queue()

        async def call() -> None:
            try:
                await self.chat(
                    request,
                    task_id=task_id,
                    priority=priority,
                    data_label=data_label,
                    cloud_approved=cloud_approved,
                    on_event=queue.put_nowait,
                )
            except Exception as exc:  # raised to the reader, from the iterator
                queue.put_nowait(exc)

        async def events() -> AsyncIterator[ChatEvent]:
            while True:
                item = await queue.get()
                if isinstance(item, Exception):
                    raise item
                yield item
                if isinstance(item, Finished):
                    return

        caller = asyncio.create_task(call())
        try:
            yield events()
        finally:
            caller.cancel()
            await asyncio.wait([caller])
