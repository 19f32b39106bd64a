"""How many tokens a request's input is, for the loop's context budget.

* Anthropic models: the API's own count (`messages.count_tokens`), one HTTP call;
* OpenAI models tiktoken knows: tiktoken's count (tiktoken_count.py), offline;
* anything else (a local server's model, a scripted one, a provider that is down or
  refused to count): the estimate, four characters a token.

`TokenCount.method` says which, so the journal's record of a budget decision shows how
sure it was.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ProviderError
from .messages import ChatRequest

log = logging.getLogger("pfar.llm")

ESTIMATE = "estimate"


@dataclass(frozen=True, slots=True)
class TokenCount:
    tokens: int
    method: str  # "anthropic", "tiktoken:<encoding>", or "estimate"


@runtime_checkable
class CountsTokens(Protocol):
    """A provider that can count a request's input tokens as its model does. It returns
    None when it cannot (a model its tokenizer does not know) and raises `ProviderError`
    when the count failed."""

    async def count_tokens(self, request: ChatRequest) -> TokenCount | None: ...


def estimate(request: ChatRequest) -> TokenCount:
    """Four characters a token over everything the request sends."""
    chars = len(request.system)
    chars += sum(
        len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in request.tools
    )
    for m in request.messages:
        chars += len(m.text)
        chars += sum(len(c.name) + len(str(c.input)) for c in m.tool_calls)
        chars += sum(len(r.content) for r in m.tool_results)
    return TokenCount(chars // 4 + 1, ESTIMATE)


async def count(provider: object, request: ChatRequest) -> TokenCount:
    """`provider`'s count of the request, or the estimate when it has none or the count
    failed (a count is a help for the budget, never a reason for a call to fail)."""
    if not isinstance(provider, CountsTokens):
        return estimate(request)
    try:
        counted = await provider.count_tokens(request)
    except ProviderError as exc:
        log.warning("token count of %s failed, estimated instead: %s", request.model, exc)
        return estimate(request)
    return counted if counted is not None else estimate(request)
