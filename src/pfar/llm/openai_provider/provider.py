"""The OpenAI provider's call: one streamed answer, retried per pfar's error table.

The partial-stream rule. The chat-completions stream never announces how long
the answer will be (usage comes in the very last chunk, if at all), so "more
than half arrived" can only be judged at the one point the stream marks: the
choice's `finish_reason`. It comes after the last content and tool-call delta.

* The stream broke (connection dropped, read timed out) *after* the
  finish_reason arrived: the whole answer is here, only the trailer (usage chunk,
  `[DONE]`) was lost. Keep it: `StopReason.partial`, usage as far as it arrived.
* The stream ended, cleanly or not, *before* any finish_reason: an unknown part
  of the answer is missing (a tool call's arguments may stop mid-string), so it
  does not count as more than half: retry (`ErrorKind.stream_cut`, backoff).

A clean end after the finish_reason but without `[DONE]` cannot be told apart
from a complete stream through the SDK, and is one: the answer is whole.

Given an `on_event` sink, the call streams as it folds (see `events`): each text
delta, each piece of a tool call's arguments, the checked tool calls once the
finish_reason has come (the chat-completions stream does not mark where one call
ends), a `Retrying` before each retry, and `Finished` with the whole answer.

The api key is never logged and never part of an error: error texts are
scrubbed of it, and SDK exceptions (whose request carries the Authorization
header) are not chained to the errors raised here. It is read at every call
(see `keys.ApiKey`), so a key changed in the vault is used from the next call.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai

from .. import tiktoken_count
from ..events import EventSink, Finished, ignore
from ..keys import ApiKey, read_key
from ..messages import ChatRequest, ChatResponse, StopReason
from ..retry import AttemptFailed, ErrorKind, RetryPolicy, call_with_retries
from ..tokens import TokenCount
from .error_table import classify
from .request import build_params
from .stream import Accumulator, stop_reason

PROVIDER = "openai"

Sleep = Callable[[float], Awaitable[Any]]

# OpenAI echoes a rejected key (masked) in its 401 message: never pass even that on
_KEY_ECHO = re.compile(r"(API key provided:\s*)\S+", re.IGNORECASE)
_MIN_SECRET_LEN = 4  # shorter "keys" (local servers accept "x") are not secrets


class OpenAIProvider:
    """`chat(request)` against an OpenAI chat-completions endpoint, with pfar's retries."""

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
        _checked(api_key() if callable(api_key) else api_key)  # a missing key: refused now
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._policy = policy
        self._sleep = sleep

    async def count_tokens(self, request: ChatRequest) -> TokenCount | None:
        """tiktoken's count for a model it knows (offline); None for any other."""
        return await tiktoken_count.count(request)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIProvider(base_url={self._base_url!r}, timeout={self._timeout!r})"

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        """One answer, retried per the error table; ProviderCallFailed when it gives up."""
        key = _checked(read_key(self._api_key))
        async with openai.AsyncOpenAI(
            api_key=key,
            base_url=self._base_url,
            timeout=self._timeout,
            max_retries=0,
        ) as client:
            params = build_params(request, official=client.base_url.host == "api.openai.com")
            response = await call_with_retries(
                PROVIDER,
                self._policy,
                self._sleep,
                lambda: self._attempt(client, params, request, on_event),
                lambda text: _scrub(text, key),
                request.attempt_timeout,
                on_event,
            )
        if on_event is not None:
            on_event(Finished(response))
        return response

    async def _attempt(
        self,
        client: openai.AsyncOpenAI,
        params: dict[str, Any],
        request: ChatRequest,
        on_event: EventSink | None,
    ) -> ChatResponse:
        started = time.monotonic()
        acc = Accumulator(on_event or ignore)
        try:
            stream = await client.chat.completions.create(**params)
        except openai.APIError as exc:
            raise classify(exc) from None
        try:
            async for chunk in stream:
                acc.add(chunk, started)
        except openai.APIError as exc:
            failure = classify(exc, chunks=acc.chunks)
            if acc.finish_reason is None:
                raise failure from None
            # the whole answer arrived, only the trailer was lost: keep it
            return acc.response(request, StopReason.partial, started)
        except json.JSONDecodeError as exc:
            raise AttemptFailed(ErrorKind.server, f"malformed stream event: {exc}") from None
        finally:
            await stream.close()
        if acc.finish_reason is None:
            raise AttemptFailed(
                ErrorKind.stream_cut,
                f"stream ended without a finish_reason after {acc.chunks} chunk(s)",
            )
        return acc.response(request, stop_reason(acc), started)


def _checked(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(
            "openai provider: api_key must be a non-empty string "
            "(local servers accept any, e.g. 'local')"
        )
    return key


def _scrub(text: str, key: str) -> str:
    text = _KEY_ECHO.sub(r"\1[redacted]", text)
    if len(key) >= _MIN_SECRET_LEN:
        text = text.replace(key, "[redacted]")
    return text
