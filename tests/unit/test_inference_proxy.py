"""The inference proxy: shared rate limit, priority, routing by data label, accounting.

The providers here stand in for remote models (the far side), not for pfar code."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

import pytest

from pfar.llm.failover import Failover, ProvidersDown, Route
from pfar.llm.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
)
from pfar.llm.proxy import (
    CallRecord,
    ChatModel,
    InferenceProxy,
    NeedsCloudRouting,
    Price,
    RateLimiter,
)
from pfar.llm.retry import ErrorKind, ProviderCallFailed


class FarModel:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(request)
        await asyncio.sleep(0)
        return ChatResponse(
            text=f"{self.name} says hi",
            tool_calls=(),
            stop_reason=StopReason.end_turn,
            usage=Usage(input_tokens=1000, output_tokens=500),
            model=request.model,
            time_to_first_token=0.01,
            total_time=0.02,
        )


def _request(text: str = "hello") -> ChatRequest:
    return ChatRequest(model="m1", system="be brief", messages=(Message("user", text),))


def test_the_rate_limit_holds_across_20_concurrent_tasks() -> None:
    window, rpm = 0.3, 4
    granted: list[float] = []

    async def main() -> None:
        limiter = RateLimiter(rpm, 10**9, window=window)

        async def task() -> None:
            await limiter.acquire(10)
            granted.append(time.monotonic())

        await asyncio.gather(*(task() for _ in range(20)))

    asyncio.run(main())
    assert len(granted) == 20
    granted.sort()
    for i, t in enumerate(granted):  # in any window, at most rpm grants
        assert sum(1 for u in granted[i:] if u - t < window * 0.999) <= rpm


def test_an_answers_tokens_count_against_the_token_limit_not_the_request_limit() -> None:
    """Tokens learnt after a call (its answer's size) fill the token budget; they are not
    a request, so they never take a request slot."""

    async def main() -> tuple[bool, bool]:
        limiter = RateLimiter(2, 100, window=60.0)
        await limiter.acquire(10)
        limiter.record_usage(40)  # 50 of 100 tokens used, 1 of 2 requests
        second = asyncio.ensure_future(limiter.acquire(10))
        await asyncio.sleep(0.01)
        limiter.record_usage(45)  # 105 of 100: the next call waits for the window
        third = asyncio.ensure_future(limiter.acquire(1))
        await asyncio.sleep(0.01)
        done = second.done(), third.done()
        third.cancel()
        return done

    assert asyncio.run(main()) == (True, False)


def test_higher_priority_is_served_first_when_the_limit_is_reached() -> None:
    order: list[str] = []

    async def main() -> None:
        limiter = RateLimiter(1, 10**9, window=0.05)
        await limiter.acquire(1)  # the window is now full

        async def task(name: str, priority: int) -> None:
            await limiter.acquire(1, priority)
            order.append(name)

        low = [asyncio.create_task(task(f"low{i}", 0)) for i in range(3)]
        await asyncio.sleep(0)
        high = asyncio.create_task(task("high", 5))
        await asyncio.gather(*low, high)

    asyncio.run(main())
    assert order[0] == "high"
    assert order[1:] == ["low0", "low1", "low2"]


def test_a_high_label_task_goes_to_the_local_provider() -> None:
    cloud, local = FarModel("cloud"), FarModel("local")
    proxy = InferenceProxy(
        {"cloud": cloud, "local": local}, default="cloud", local="local", cloud_ceiling="internal"
    )
    r1 = asyncio.run(proxy.chat(_request(), task_id="t1", data_label="internal"))
    r2 = asyncio.run(proxy.chat(_request(), task_id="t2", data_label="secret"))
    assert (r1.text, r2.text) == ("cloud says hi", "local says hi")
    assert len(cloud.calls) == len(local.calls) == 1


def test_without_a_local_provider_a_high_label_task_needs_the_owners_approval() -> None:
    cloud = FarModel("cloud")
    proxy = InferenceProxy({"cloud": cloud}, default="cloud", cloud_ceiling="internal")
    with pytest.raises(NeedsCloudRouting, match="approve cloud routing"):
        asyncio.run(proxy.chat(_request(), task_id="t1", data_label="sensitive"))
    assert cloud.calls == []
    r = asyncio.run(
        proxy.chat(_request(), task_id="t1", data_label="sensitive", cloud_approved=True)
    )
    assert r.text == "cloud says hi"


def test_every_call_is_accounted_with_tokens_latency_and_cost() -> None:
    calls: list[CallRecord] = []
    proxy = InferenceProxy(
        {"cloud": FarModel("cloud")},
        default="cloud",
        prices={"m1": Price(input=3.0, output=15.0)},
        on_call=calls.append,
    )
    asyncio.run(proxy.chat(_request(), task_id="t9"))
    (record,) = calls
    assert (record.task_id, record.provider, record.model) == ("t9", "cloud", "m1")
    assert (record.input_tokens, record.output_tokens) == (1000, 500)
    assert record.time_to_first_token == 0.01
    assert record.cost_usd == pytest.approx((1000 * 3.0 + 500 * 15.0) / 1_000_000)


def test_bad_proxy_configuration_is_named() -> None:
    from pfar.errors import ProviderError

    with pytest.raises(ProviderError, match="default provider 'x'"):
        InferenceProxy({"cloud": FarModel("c")}, default="x")
    with pytest.raises(ProviderError, match="local provider 'ollama'"):
        InferenceProxy({"cloud": FarModel("c")}, default="cloud", local="ollama")


class DownModel(FarModel):
    """A provider whose calls fail on its side (overloaded) while `down` is set."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.down = False

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if self.down:
            self.calls.append(request)
            raise ProviderCallFailed(self.name, ErrorKind.overloaded, "HTTP 529", 1)
        return await super().chat(request)


def test_data_above_the_cloud_ceiling_never_fails_over_to_another_provider() -> None:
    # the owner approved sending it to the default provider, not to any fallback's
    cloud, other = DownModel("cloud"), FarModel("other")
    failover = Failover(
        {"cloud": cloud, "other": other},
        primary="cloud",
        fallbacks={"m1": (Route("other", "m2"),)},
        failures=1,
        wait_seconds=0,
    )
    proxy = InferenceProxy(
        {"cloud": cloud, "other": other},
        default="cloud",
        cloud_ceiling="internal",
        failover=failover,
    )
    cloud.down = True
    with pytest.raises(ProviderCallFailed):
        asyncio.run(proxy.chat(_request(), task_id="t1", data_label="secret", cloud_approved=True))
    with pytest.raises(ProvidersDown, match="no fallback"):  # it waits for cloud, alone
        asyncio.run(proxy.chat(_request(), task_id="t1", data_label="secret", cloud_approved=True))
    assert other.calls == []
    # data the ceiling lets go fails over as configured
    r = asyncio.run(proxy.chat(_request(), task_id="t2", data_label="internal"))
    assert r.text == "other says hi" and len(other.calls) == 1


def test_a_local_default_provider_keeps_data_above_the_ceiling_to_itself() -> None:
    local, cloud = DownModel("local"), FarModel("cloud")
    failover = Failover(
        {"local": local, "cloud": cloud},
        primary="local",
        fallbacks={"m1": (Route("cloud", "m2"),)},
        failures=1,
        wait_seconds=0,
    )
    proxy = InferenceProxy(
        {"local": local, "cloud": cloud}, default="local", local="local", failover=failover
    )
    local.down = True
    with pytest.raises(ProviderCallFailed):
        asyncio.run(proxy.chat(_request(), task_id="t1", data_label="secret"))
    assert cloud.calls == []


def test_the_gate_is_told_the_most_a_call_may_cost_on_any_route_it_may_take() -> None:
    # the request's tool results count, and a fallback dearer than the primary prices it
    # (failover comes after the gate)
    told: list[tuple[str, int, float]] = []

    async def gate(task_id: str, most_tokens: int, most_usd: Callable[[], float]) -> None:
        told.append((task_id, most_tokens, most_usd()))

    cloud, other = FarModel("cloud"), FarModel("other")
    providers: dict[str, ChatModel] = {"cloud": cloud, "other": other}
    proxy = InferenceProxy(
        providers,
        default="cloud",
        prices={"m1": Price(input=1.0, output=1.0), "m2": Price(input=10.0, output=20.0)},
        failover=Failover(providers, primary="cloud", fallbacks={"m1": (Route("other", "m2"),)}),
    )
    proxy.gate = gate
    result = ToolResult("c1", "x" * 40_000)
    request = ChatRequest(
        model="m1",
        system="",
        messages=(
            Message("user", "read it"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "file.read", {"path": "a"}),)),
            Message("user", "", tool_results=(result,)),
        ),
        max_tokens=100,
    )
    asyncio.run(proxy.chat(request, task_id="t1"))
    ((task_id, most_tokens, most_usd),) = told
    assert task_id == "t1"
    assert 10_000 < most_tokens - 100 < 10_100  # the tool result's 40,000 characters
    assert most_usd == pytest.approx(((most_tokens - 100) * 10.0 + 100 * 20.0) / 1_000_000)
    # data above the ceiling goes nowhere else: its own route's price
    told.clear()
    asyncio.run(proxy.chat(request, task_id="t1", data_label="secret", cloud_approved=True))
    assert told[0][2] == pytest.approx(((most_tokens - 100) * 1.0 + 100 * 1.0) / 1_000_000)


def test_a_request_measured_by_its_caller_is_not_sized_again() -> None:
    # a loop turn's fit counted it (for real, near the budget): the gate and the limit
    # take that count, not the proxy's estimate of the same request
    told: list[int] = []

    async def gate(task_id: str, most_tokens: int, most_usd: Callable[[], float]) -> None:
        told.append(most_tokens)

    far = FarModel("cloud")
    proxy = InferenceProxy({"cloud": far}, default="cloud")
    proxy.gate = gate
    counted = dataclasses.replace(_request("x" * 4_000), max_tokens=100, input_tokens=1_234)
    asyncio.run(proxy.chat(counted, task_id="t1"))
    asyncio.run(proxy.chat(dataclasses.replace(counted, input_tokens=None), task_id="t1"))
    assert told == [1_234 + 100, 1_000 + 3 + 100]  # (4,000 + 8 characters) / 4, + 1
