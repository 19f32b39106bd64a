"""A scripted chat model: answers come from a handler, not from a network.

`ScriptedChatModel(handler)` is a real chat model the way `httpx.MockTransport` is a
real transport: `handler(request) -> ChatResponse` (or an awaitable of one) answers
each request from the conversation so far, and the model does the rest a model does:
it bounds the answer by the request's `attempt_timeout`, measures it, streams it to
`on_event` (the text as one delta, each tool call, `Finished`) and returns it. It sits
behind the inference proxy like a real model (rate limit, accounting), answers
in-process (`remote = False`), and never retries.

A handler answers from what the request holds, never from how many calls came
before, so a call made again after a crash gets the same answer. Handlers are
Python functions (tests), or a script file (`script_file.ScriptHandler`: the demo,
tests, offline use; docs/scripts.md): its `[[turns]]` answer conversations, its
`[[responses]]` answer the pipeline's phases.

`reply()` builds a handler's answer. `Matcher` is a script's regular expression,
searched with a timeout off the event loop (see its docstring).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence

from ..errors import ConfigError, ProviderError
from ..timeouts import bounded
from .events import EventSink, replay
from .messages import ChatRequest, ChatResponse, StopReason, ToolCall, Usage

Handler = Callable[[ChatRequest], ChatResponse | Awaitable[ChatResponse]]


class ScriptedChatModel:
    name = "scripted"
    remote = False  # it answers in-process: nothing is sent anywhere

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        started = time.monotonic()
        seconds = request.attempt_timeout
        try:
            answer = self._handler(request)
            # a handler that answers at once needs no timer (nothing could cut it short)
            response = await bounded(answer, seconds) if inspect.isawaitable(answer) else answer
        except TimeoutError:
            raise ProviderError(
                f"scripted provider: no answer within {seconds:g}s (llm_seconds)"
            ) from None
        if not response.total_time:
            elapsed = time.monotonic() - started
            response = dataclasses.replace(
                response, time_to_first_token=elapsed, total_time=elapsed
            )
        if on_event is not None:
            replay(response, on_event)
        return response


def reply(
    request: ChatRequest,
    text: str = "",
    tool_calls: Sequence[ToolCall] = (),
    stop_reason: StopReason | None = None,
    usage: Usage | None = None,
) -> ChatResponse:
    """A handler's answer to `request`: stop reason `tool_use` when it calls tools,
    else `end_turn`, unless given."""
    if stop_reason is None:
        stop_reason = StopReason.tool_use if tool_calls else StopReason.end_turn
    return ChatResponse(text, tuple(tool_calls), stop_reason, usage or Usage(), request.model)


# how long one `match` may search one input; a sane pattern takes microseconds
MATCH_TIMEOUT_SECONDS = 1.0


class Matcher:
    """A script author's regular expression, searched in anyone's text.

    A pattern that backtracks catastrophically must not stall the kernel. Matching
    uses the `regex` package, whose matcher stops itself at a timeout (a thread cannot
    interrupt `re`, and a subprocess per match would cost more than the match), in a
    worker thread with the GIL released, so the event loop (control socket, other
    tasks, model timeouts) runs on while it matches.
    """

    def __init__(self, pattern: str, source: str, key: str) -> None:
        self._source, self._key = source, key  # e.g. responses.3.match, for messages
        import regex  # here: a script with no `match` does not pay for its import

        try:
            self._pattern = regex.compile(pattern)
        except regex.error as exc:
            raise ConfigError(source, key, f"bad regex: {exc}") from None

    async def search(self, text: str) -> bool:
        try:
            found = await asyncio.to_thread(
                self._pattern.search, text, timeout=MATCH_TIMEOUT_SECONDS, concurrent=True
            )
        except TimeoutError:
            raise ProviderError(
                f"scripted provider: {self._source}: {self._key}: the pattern "
                f"{self._pattern.pattern!r} took more than {MATCH_TIMEOUT_SECONDS:g}s on this "
                "task's input (it backtracks catastrophically: simplify it)"
            ) from None
        return found is not None


__all__ = ["MATCH_TIMEOUT_SECONDS", "Handler", "Matcher", "ScriptedChatModel", "reply"]
