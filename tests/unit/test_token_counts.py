"""Which count the proxy gives the context budget: the provider's own while it is up and
may see the data; else the estimate (a count never makes a call fail)."""

from __future__ import annotations

import asyncio

from pfar.errors import ProviderError
from pfar.llm.events import EventSink
from pfar.llm.failover import Failover
from pfar.llm.messages import ChatRequest, ChatResponse, Message
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
