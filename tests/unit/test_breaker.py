"""The circuit breaker's states, on an injected clock; and failover between routes with
providers that fail as told (in-process chat models standing in for remote ones)."""

from __future__ import annotations

import asyncio

import pytest

from pfar.errors import ProviderError
from pfar.llm.breaker import BreakerState, BreakerView, Change, CircuitBreaker, Health, counts
from pfar.llm.events import ChatEvent, EventSink, Retrying
from pfar.llm.failover import Failover, ProvidersDown, Route, parse_fallback
from pfar.llm.messages import ChatRequest, ChatResponse, Message, StopReason, Usage
from pfar.llm.retry import ErrorKind, ProviderCallFailed


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _down(kind: ErrorKind = ErrorKind.server) -> ProviderCallFailed:
    return ProviderCallFailed("p", kind, "HTTP 500 api_error: boom", 4)


def test_its_view_says_what_the_owner_is_shown_at_each_state() -> None:
    clock = Clock()
    b = CircuitBreaker("p", failures=2, open_seconds=10, clock=clock)
    assert b.view() == BreakerView(BreakerState.closed, 0, 0.0, "")
    b.failed("HTTP 500: boom")
    assert b.view() == BreakerView(BreakerState.closed, 1, 0.0, "HTTP 500: boom")
    b.failed("HTTP 529: overloaded")
    clock.now += 4
    assert b.view() == BreakerView(BreakerState.open, 2, 6.0, "HTTP 529: overloaded")
    clock.now += 6
    assert b.admit()  # the probe is out: the next call waits for its word
    assert b.view() == BreakerView(BreakerState.half_open, 2, None, "HTTP 529: overloaded")
    b.succeeded()
    assert b.view() == BreakerView(BreakerState.closed, 0, 0.0, "")


def test_opens_after_n_failures_in_a_row_and_probes_after_open_seconds() -> None:
    clock = Clock()
    b = CircuitBreaker("p", failures=3, open_seconds=10, clock=clock)
    assert b.state is BreakerState.closed
    assert b.failed("x") is None and b.failed("x") is None
    assert b.succeeded() is None  # a success in between: the count starts again
    assert b.failed("x") is None and b.failed("x") is None
    went = b.failed("the last error")
    assert went is not None and went.change is Change.down and went.failures == 3
    assert went.detail == "the last error"
    assert b.state is BreakerState.open and not b.admit()
    assert b.retry_in() == 10
    clock.now += 9.9
    assert not b.admit()
    clock.now += 0.1
    assert b.state is BreakerState.half_open
    assert b.admit()  # the probe
    assert not b.admit()  # one probe at a time
    assert b.retry_in() is None
    back = b.succeeded()
    assert back is not None and back.change is Change.up
    assert b.state is BreakerState.closed and b.admit()


def test_a_failed_probe_opens_it_again_without_a_second_down() -> None:
    clock = Clock()
    b = CircuitBreaker("p", failures=1, open_seconds=5, clock=clock)
    assert b.failed("x") is not None
    clock.now += 5
    assert b.admit()
    assert b.failed("still down") is None  # the owner was told already
    assert b.state is BreakerState.open and b.retry_in() == 5
    clock.now += 5
    assert b.admit()
    b.abandoned()  # a cancelled probe: the next call probes
    assert b.admit()


def test_which_errors_count() -> None:
    for kind in (ErrorKind.timeout, ErrorKind.server, ErrorKind.overloaded):
        assert counts(_down(kind))
    assert counts(_down(ErrorKind.rate_limited)) and counts(_down(ErrorKind.stream_cut))
    assert not counts(_down(ErrorKind.bad_request))
    assert not counts(_down(ErrorKind.unauthorized))
    assert not counts(ProviderError("a 401 named by the kernel"))


def test_fallback_entries() -> None:
    assert parse_fallback("claude-haiku", "anthropic") == Route("anthropic", "claude-haiku")
    assert parse_fallback("local:llama3:8b", "anthropic") == Route("local", "llama3:8b")


class Flaky:
    """A provider that fails while `down` is set, else answers with its name."""

    def __init__(self, name: str) -> None:
        self.name, self.down = name, False
        self.calls: list[str] = []

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        self.calls.append(request.model)
        if self.down:
            raise ProviderCallFailed(self.name, ErrorKind.overloaded, "HTTP 529", 4)
        return ChatResponse(
            text=self.name,
            tool_calls=(),
            stop_reason=StopReason.end_turn,
            usage=Usage(1, 1),
            model=request.model,
        )


REQ = ChatRequest(model="big", system="", messages=(Message("user", "hi"),), max_tokens=10)


def test_calls_fail_over_in_order_and_come_back() -> None:
    async def run() -> None:
        clock = Clock()
        a, b = Flaky("a"), Flaky("b")
        told: list[Health] = []

        async def tell(health: Health) -> None:
            told.append(health)

        f = Failover(
            {"a": a, "b": b},
            primary="a",
            fallbacks={"big": (Route("a", "small"), Route("b", "other"))},
            failures=2,
            open_seconds=30,
            wait_seconds=0,
            on_health=tell,
            clock=clock,
        )
        a.down = True
        events: list[ChatEvent] = []
        name, answer = await f.chat("a", REQ, events.append)
        # big failed, small failed (both on a), then b answered
        assert (name, answer.model) == ("b", "other")
        assert a.calls == ["big", "small"] and b.calls == ["other"]
        assert [e.reason for e in events if isinstance(e, Retrying)] == [
            "overloaded, failing over to a:small",
            "overloaded, failing over to b:other",
        ]
        assert [h.change for h in told] == [Change.down]
        name, _ = await f.chat("a", REQ)  # open: straight to b
        assert name == "b" and a.calls == ["big", "small"]
        a.down = False
        clock.now += 30
        name, answer = await f.chat("a", REQ)  # the probe
        assert (name, answer.model) == ("a", "big")
        assert [h.change for h in told] == [Change.down, Change.up]

    asyncio.run(run())


def test_with_nowhere_to_go_a_call_waits_for_the_probe_then_gives_up() -> None:
    async def run() -> None:
        a = Flaky("a")
        f = Failover({"a": a}, primary="a", failures=1, open_seconds=0.05, wait_seconds=1)
        a.down = True
        with pytest.raises(ProviderCallFailed):
            await f.chat("a", REQ)  # tried, failed: its own error at once
        a.down = False
        name, _ = await f.chat("a", REQ)  # waits for the half-open probe, which answers
        assert name == "a" and len(a.calls) == 2
        a.down = True
        with pytest.raises(ProviderCallFailed):
            await f.chat("a", REQ)
        g = Failover({"a": a}, primary="a", failures=1, open_seconds=60, wait_seconds=0.05)
        with pytest.raises(ProviderCallFailed):
            await g.chat("a", REQ)
        with pytest.raises(ProvidersDown, match="no fallback is configured"):
            await g.chat("a", REQ)

    asyncio.run(run())


def test_only_the_primary_fails_over() -> None:
    f = Failover(
        {"a": Flaky("a"), "local": Flaky("local")},
        primary="a",
        fallbacks={"big": (Route("a", "small"),)},
    )
    assert f.routes("local", REQ) == (Route("local", "big"),)
    assert f.routes("a", REQ) == (Route("a", "big"), Route("a", "small"))
