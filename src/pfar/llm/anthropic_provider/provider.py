"""The Anthropic provider's call: one streamed answer, retried per pfar's error table.

Partial rule. When the stream stops early the answer so far is kept, with
`StopReason.partial`, only if more than half of the expected output arrived:

    received = max(output_tokens the server last reported, ceil(chars received / 4))
    expected = output_tokens from message_delta, if it arrived; else request.max_tokens
    keep iff  2 * received > expected  and there is text or a finished tool call

Characters counted are those of text, thinking and tool-input JSON deltas; four per
token is the usual estimate for English. The real API reports the final output count
only in message_delta, just before message_stop, so mid-answer the denominator is
usually `max_tokens`: the rule leans towards retrying, never towards a truncated answer
of unknown size. A kept partial answer holds the text received (including the open text
block) and the tool calls whose blocks were finished; an unfinished tool call is dropped.
Otherwise the attempt counts as `stream_cut` and is retried with the backoff.

The API key is given to the SDK only: it is never logged, and every error text is
scrubbed of it before it is raised. It is read at every call (see `keys.ApiKey`); the
client is rebuilt, sharing its connection pool, when it changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic

from ..events import EventSink, Finished, ignore
from ..keys import ApiKey, read_key
from ..messages import ChatRequest, ChatResponse, StopReason, ToolSchema
from ..retry import AttemptFailed, ErrorKind, ProviderCallFailed, RetryPolicy, call_with_retries
from ..tokens import TokenCount
from .error_table import describe_connection, is_transport_error, status_failure
from .request import build_params
from .stream import Accumulator

PROVIDER = "anthropic"

# what a count takes of a request's arguments (not max_tokens, stream or temperature)
_COUNTED = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
_COUNT_SECONDS = 10.0

Sleep = Callable[[float], Awaitable[object]]


class AnthropicProvider:
    """Chat with Claude through the Messages API, streamed, with pfar's retry policy."""

    name = PROVIDER

    def __init__(
        self,
        api_key: ApiKey,
        *,
        base_url: str | None,
        timeout: float,
        policy: RetryPolicy,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._key = api_key
        self._secret = read_key(api_key)
        self._policy = policy
        self._sleep = sleep
        self._client = anthropic.AsyncAnthropic(
            api_key=self._secret, base_url=base_url, timeout=timeout, max_retries=0
        )

    def _client_for_call(self) -> tuple[anthropic.AsyncAnthropic, str]:
        """The client with the key as the vault holds it now."""
        key = read_key(self._key)
        if key != self._secret:
            # a copy with the new key; it shares the connection pool, so nothing to close
            self._client = self._client.with_options(api_key=key)
            self._secret = key
        return self._client, key

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        params = build_params(request)
        tools = {tool.name: tool for tool in request.tools}
        client, key = self._client_for_call()
        response = await call_with_retries(
            PROVIDER,
            self._policy,
            self._sleep,
            lambda: self._attempt(client, request, params, tools, on_event),
            lambda text: text.replace(key, "[api key]") if key else text,
            request.attempt_timeout,
            on_event,
        )
        if on_event is not None:
            on_event(Finished(response))
        return response

    async def count_tokens(self, request: ChatRequest) -> TokenCount:
        """The request's input tokens as the API counts them (POST
        /v1/messages/count_tokens): the same model, system, messages and tools the call
        sends. One attempt: a count that fails is the caller's to replace (the estimate).

        Raises:
            ProviderError: the API did not answer, or refused.
        """
        params = {k: v for k, v in build_params(request).items() if k in _COUNTED}
        client, key = self._client_for_call()
        try:
            counted = await client.messages.count_tokens(**params, timeout=_COUNT_SECONDS)
        except anthropic.APIStatusError as exc:
            failed = status_failure(exc)
        except anthropic.APIConnectionError as exc:
            failed = AttemptFailed(ErrorKind.timeout, describe_connection(exc))
        else:
            return TokenCount(counted.input_tokens, PROVIDER)
        detail = failed.detail.replace(key, "[api key]") if key else failed.detail
        raise ProviderCallFailed(PROVIDER, failed.kind, f"counting tokens: {detail}", 1)

    async def _attempt(
        self,
        client: anthropic.AsyncAnthropic,
        request: ChatRequest,
        params: dict[str, Any],
        tools: dict[str, ToolSchema],
        on_event: EventSink | None,
    ) -> ChatResponse:
        started = time.perf_counter()
        try:
            stream = await client.messages.create(**params, stream=True)
        except anthropic.APIStatusError as exc:
            raise status_failure(exc) from None
        except anthropic.APIConnectionError as exc:  # APITimeoutError included
            raise AttemptFailed(ErrorKind.timeout, describe_connection(exc)) from None

        acc = Accumulator(tools, started, on_event or ignore)
        cut: str | None = None
        try:
            async with stream:
                async for event in stream:
                    acc.feed(event)
        except anthropic.APIStatusError as exc:  # an `event: error` inside the stream
            raise status_failure(exc) from None
        except Exception as exc:
            if not (isinstance(exc, anthropic.APIConnectionError) or is_transport_error(exc)):
                raise
            cut = f"the connection broke mid-stream ({type(exc).__name__}: {exc})"
        if acc.stopped and acc.stop_reason is not None:
            return acc.response(acc.stop_reason, request.model)
        if acc.stopped:
            cut = "message_stop arrived without a stop_reason"
        elif cut is None:
            cut = "the stream ended before message_stop"
        received, expected = acc.progress(request.max_tokens)
        detail = f"{cut}; about {received} of {expected} output tokens had arrived"
        if 2 * received > expected and acc.has_content():
            return acc.response(StopReason.partial, request.model, partial=True)
        raise AttemptFailed(ErrorKind.stream_cut, detail)
