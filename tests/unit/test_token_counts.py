"""Which count the proxy gives the context budget: the provider's own while it is up and
may see the data; else the estimate (a count never makes a call fail)."""

from __future__ import annotations

import asyncio

from pfar.errors import ProviderError
from pfar.llm.events import EventSink
from pfar.llm.failover import Failover
from pfar.llm.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSchema,
)
from pfar.llm.proxy import InferenceProxy
from pfar.llm.tokens import ESTIMATE, TokenCount, estimate

REQ = ChatRequest(model="m", system="be brief", messages=(Message("user", "x" * 400),))


class Counting:
    """A provider that counts every request as 7 tokens (or fails to, when told)."""

    def __init__(self) -> None:
        self.refuse = False

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        raise AssertionError("not called")

    async def count_tokens(self, request: ChatRequest) -> TokenCount | None:
        if self.refuse:
            raise ProviderError("counting tokens: HTTP 500")
        return TokenCount(7, "counted")


def test_the_provider_counts_while_it_is_up_and_may_see_the_data() -> None:
    provider = Counting()
    failover = Failover({"p": provider}, primary="p", failures=1)
    proxy = InferenceProxy({"p": provider}, default="p", failover=failover)
    assert asyncio.run(proxy.count_tokens(REQ)) == TokenCount(7, "counted")
    # secret data may not go to the (cloud) provider, not even to be counted
    assert asyncio.run(proxy.count_tokens(REQ, data_label="secret")) == estimate(REQ)
    provider.refuse = True
    assert asyncio.run(proxy.count_tokens(REQ)).method == ESTIMATE
    provider.refuse = False
    failover.breakers["p"].failed("down")  # open: no call to a provider that is down
    assert asyncio.run(proxy.count_tokens(REQ)) == estimate(REQ)
    assert estimate(REQ).tokens == (len("be brief") + 400) // 4 + 1


def test_the_estimate_counts_everything_a_request_sends_thinking_sent_back_too() -> None:
    call = ToolCall("c1", "Read", {"path": "a"})
    thought = ThinkingBlock("thinking", thinking="t" * 800, signature="sig")
    hidden = ThinkingBlock("redacted_thinking", data="d" * 400)
    messages = (
        Message("user", "u" * 100),
        Message("assistant", "", tool_calls=(call,), thinking=(thought, hidden)),
        Message("user", "", tool_results=(ToolResult("c1", "r" * 1_000),)),
    )
    tool = ToolSchema("Read", "reads", {"type": "object"})
    chars = 10 + 100 + len("Read") + len(str(call.input)) + 800 + 400 + 1_000
    chars += len("Read") + len("reads") + len('{"type": "object"}')
    request = ChatRequest(model="m", system="s" * 10, messages=messages, tools=(tool,))
    assert estimate(request) == TokenCount(chars // 4 + 1, ESTIMATE)
