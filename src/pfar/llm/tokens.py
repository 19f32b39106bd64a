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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ProviderError
from .messages import ChatRequest, Message, ToolSchema

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


def tool_chars(tools: Sequence[ToolSchema]) -> int:
    """What the offered tools take of a request: names, descriptions and schemas (one
    sum for a loop turn, however often its conversation is measured)."""
    return sum(len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in tools)


def estimated(system: str, messages: Sequence[Message], tools_chars: int = 0) -> int:
    """Four characters a token over everything a request sends: the one estimate, for
    the loop's context budget, `/context`, the shared limit and the spend gate alike."""
    chars = len(system) + tools_chars
    for m in messages:
        chars += len(m.text)
        chars += sum(len(c.name) + len(str(c.input)) for c in m.tool_calls)
        chars += sum(len(r.content) for r in m.tool_results)
        # thinking sent back within a tool-use exchange is input the provider bills
        chars += sum(len(t.thinking) + len(t.data) for t in m.thinking)
    return chars // 4 + 1


def estimate(request: ChatRequest) -> TokenCount:
    return TokenCount(
        estimated(request.system, request.messages, tool_chars(request.tools)), ESTIMATE
    )


def input_tokens(request: ChatRequest) -> int:
    """The request's input as its caller measured it (a loop turn's fit, a real count
    where it made one), else estimated here."""
    if request.input_tokens is not None:
        return request.input_tokens
    return estimate(request).tokens


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
