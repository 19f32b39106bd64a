"""Where a model call goes while a provider is down: the tier's fallbacks, in order.

A call asks for a model of a provider (the primary route). Each provider has a circuit
breaker (breaker.py). The call goes to the first route, in the order
`[primary, *fallbacks of that model]`, whose breaker admits it:

* it answers: that route's provider and model answered (the journal's `llm_calls` row
  and the loop's turn name them), and its breaker is closed again if it was half-open;
* it fails on the provider's side after its retries (`breaker.counts`): the failure is
  counted, and the same call goes on to the next route (a viewer of the stream is told
  with a `Retrying` event that what it saw is void);
* it fails for a reason of the request (a 400) or the key (a 401): that is the call's
  error, as without failover (another provider would refuse the same request).

When no route admits the call (each is open, or its probe is out), the call waits for
the first of them to admit one (its half-open probe, or the probe's success), at most
`wait_seconds`; then it fails with the last provider error, or one saying which
providers are down. When every route was tried in this call and failed, it fails at
once with the last one's error: each had its retries.

A fallback gets the call without extended thinking and without the thinking blocks of
earlier answers: each block is signed by the model that wrote it, and another model (or
an OpenAI-compatible provider) refuses a request with them, a refusal of the request
that would not count against the breaker and so would fail the call instead of failing
it over.

Only calls that go to the default provider fail over, and only with data the cloud
ceiling lets go anywhere. A call whose data is above the ceiling (routed to the local
provider, or to the default one with the owner's approval of that one) never goes to
another provider: it waits for its own.

Fallbacks are keyed by the model the call asks for (the tier's model), so a runner
asks for a tier's model as it always did and needs to know nothing of this.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ProviderError
from .breaker import CircuitBreaker, Health, counts
from .events import EventSink, Retrying
from .messages import ChatRequest, ChatResponse

if TYPE_CHECKING:
    from .proxy import ChatModel

log = logging.getLogger("pfar.llm")


@dataclass(frozen=True, slots=True)
class Route:
    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_fallback(entry: str, primary: str) -> Route:
    """ "model" (the primary provider's) or "provider:model" (split at the first colon)."""
    provider, colon, model = entry.partition(":")
    return Route(provider, model) if colon else Route(primary, entry)


class ProvidersDown(ProviderError):
    """Every provider a call could go to is down, and none came back in time."""

    code = "providers_down"


class Failover:
    """Sends each call to the first healthy route; counts each provider's failures."""

    def __init__(
        self,
        providers: Mapping[str, ChatModel],
        *,
        primary: str,
        fallbacks: Mapping[str, Sequence[Route]] | None = None,
        failures: int = 5,
        open_seconds: float = 30.0,
        wait_seconds: float = 60.0,
        on_health: Callable[[Health], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._providers, self._primary = providers, primary
        self._fallbacks = {m: tuple(r) for m, r in (fallbacks or {}).items()}
        for model, routes in self._fallbacks.items():
            for route in routes:
                if route.provider not in providers:
                    raise ProviderError(
                        f"the fallback {route} of model {model!r} names provider "
                        f"{route.provider!r}, which is not configured"
                    )
        self.breakers = {
            name: CircuitBreaker(name, failures=failures, open_seconds=open_seconds, clock=clock)
            for name in providers
        }
        self._wait, self._on_health, self._clock = wait_seconds, on_health, clock

    def routes(
        self, provider: str, request: ChatRequest, *, alone: bool = False
    ) -> tuple[Route, ...]:
        """Where the call may go, in order; `alone`: to `provider` only (its data may go
        nowhere else)."""
        first = Route(provider, request.model)
        if alone or provider != self._primary:
            return (first,)
        return (first, *(r for r in self._fallbacks.get(request.model, ()) if r != first))

    async def chat(
        self,
        provider: str,
        request: ChatRequest,
        on_event: EventSink | None = None,
        *,
        alone: bool = False,
    ) -> tuple[str, ChatResponse]:
        """The answer of the first route that gives one, and the provider it came from."""
        routes = self.routes(provider, request, alone=alone)
        failed: set[Route] = set()
        last: ProviderError | None = None
        waited_since: float | None = None
        while True:
            for route in routes:
                if route in failed or not self.breakers[route.provider].admit():
                    continue
                try:
                    response = await self._call(
                        route, request, on_event, fallback=route != routes[0]
                    )
                except ProviderError as exc:
                    if not counts(exc):
                        raise
                    failed.add(route)
                    last = exc
                    later = [r for r in routes if r not in failed]
                    if later and on_event is not None:  # what it streamed is void
                        kind = getattr(exc, "kind", "error")
                        why = f"{kind}, failing over to {later[0]}"
                        on_event(Retrying(len(failed), why, str(exc), 0))
                    continue
                return route.provider, response
            waiting = [r for r in routes if r not in failed]
            if not waiting:
                assert last is not None
                raise last
            now = self._clock()
            waited_since = now if waited_since is None else waited_since
            left = self._wait - (now - waited_since)
            if left <= 0:
                down = ", ".join(sorted({r.provider for r in waiting}))
                raise ProvidersDown(
                    f"model {request.model!r}: provider {down} is down (its circuit breaker "
                    f"is open) and did not come back within {self._wait:g}s "
                    "([llm.breaker] wait_seconds)"
                    + (f"; the last error: {last}" if last is not None else "")
                    + ("" if len(routes) > 1 else "; no fallback is configured for it")
                )
            await self._first_change(waiting, left)

    async def _call(
        self, route: Route, request: ChatRequest, on_event: EventSink | None, *, fallback: bool
    ) -> ChatResponse:
        breaker = self.breakers[route.provider]
        if fallback:
            request = _without_thinking(dataclasses.replace(request, model=route.model))
            log.info("model call failed over to %s", route)
        try:
            if on_event is None:
                response = await self._providers[route.provider].chat(request)
            else:
                response = await self._providers[route.provider].chat(request, on_event=on_event)
        except ProviderError as exc:
            health = breaker.failed(str(exc)) if counts(exc) else breaker.succeeded()
            await self._tell(health)
            raise
        except BaseException:
            breaker.abandoned()
            raise
        await self._tell(breaker.succeeded())
        return response

    async def _tell(self, health: Health | None) -> None:
        """Log a change and tell the owner (committed before the call goes on)."""
        if health is None:
            return
        if health.change == "down":
            log.warning(
                "provider %s is down after %d failed calls: %s",
                health.provider,
                health.failures,
                health.detail,
            )
        else:
            log.info("provider %s answers again", health.provider)
        if self._on_health is not None:
            await self._on_health(health)

    async def _first_change(self, routes: Sequence[Route], left: float) -> None:
        """Wait until one of the routes' breakers may admit a call, or `left` passes."""
        breakers = [self.breakers[p] for p in dict.fromkeys(r.provider for r in routes)]
        soonest = min((s for s in (b.retry_in() for b in breakers) if s is not None), default=left)
        if soonest <= 0:
            await asyncio.sleep(0)
            return
        timeout = min(left, soonest)
        waits = [asyncio.ensure_future(b.changed(timeout)) for b in breakers]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()


def _without_thinking(request: ChatRequest) -> ChatRequest:
    """The request as a fallback gets it: without thinking and without the answers'
    thinking blocks. Each block is signed by the model that wrote it, which the fallback
    is not; and with thinking on, the API wants the exchange's last answer to start with
    a block the model asked can take. Asked without thinking, a fallback answers mid-way
    through a tool-use exchange as the API allows; the loop then asks without thinking
    until that exchange ends (its next answers carry no block of the model it asks)."""
    if request.thinking_budget is None and not any(m.thinking for m in request.messages):
        return request
    return dataclasses.replace(
        request,
        thinking_budget=None,
        messages=tuple(dataclasses.replace(m, thinking=()) for m in request.messages),
    )
