"""The Anthropic Messages API as a provider: one streamed call, with pfar's error table.

`AnthropicProvider.chat` maps a provider-neutral `ChatRequest` to the Messages API,
streams the answer through the official SDK (`AsyncAnthropic`, `max_retries=0`: the
retrying is pfar's, per `retry.next_wait`) and folds the raw events into a
`ChatResponse`:

* text blocks are joined into `text`; thinking blocks are read and dropped;
* tool_use blocks: the `input_json_delta` pieces are joined and parsed at
  content_block_stop, then checked: the tool must be one of the request's tools and its
  input must be a JSON object matching the tool's `input_schema` (a subset of JSON
  Schema: type, properties, required, additionalProperties, items, enum). A call failing
  a check is not raised: it becomes an error `ToolResult` in `invalid_tool_calls`;
* given an `on_event` sink, the call streams as it folds (see `events`): each text
  delta, each piece of a tool call's input, each checked tool call at its block's end,
  a `Retrying` before each retry, and `Finished` with the whole answer;
* `time_to_first_token` is measured from sending the request to the first
  content_block_delta, `total_time` from sending it to message_stop (the answering
  attempt only; waits between retries are not included).

Errors (seed 001, Phase 3):

* timeout or connection failure before the answer starts, 5xx  -> retry after the backoff
* 429 -> wait `retry-after-ms` / `retry-after` (seconds or an HTTP date), else the backoff
* 401 -> `ProviderCallFailed(unauthorized)` at once: the key is wrong (the kernel names
  the secret to fix)
* 400 and other 4xx -> `ProviderCallFailed(bad_request)` at once, with the API's message
* 529, or an `overloaded_error` event inside the stream -> `policy.overloaded_wait`
* the stream ends (or the connection drops) before message_stop -> the partial rule below

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

A connection that breaks mid-stream surfaces as the SDK's HTTP library's own
`TransportError` (`httpx`, or `httpx2` in newer SDKs), not as an SDK exception. That
library is the SDK's to choose and is not one of pfar's dependencies, so it is
recognised by its class name (`_is_transport_error`) rather than imported.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    TextBlock,
    TextDelta,
    ThinkingDelta,
    ToolUseBlock,
)

from ..json_schema import validate_schema
from . import events
from .events import EventSink, Finished, ToolCallDelta, ToolCallDone, ignore
from .keys import ApiKey, read_key
from .messages import (
    NO_TEXT,
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
    sendable_name,
)
from .retry import (
    AttemptFailed,
    ErrorKind,
    RetryPolicy,
    call_with_retries,
    retry_after_seconds,
)

PROVIDER = "anthropic"
_CHARS_PER_TOKEN = 4

_STOP_REASONS = {
    "end_turn": StopReason.end_turn,
    "tool_use": StopReason.tool_use,
    "max_tokens": StopReason.max_tokens,
    "stop_sequence": StopReason.stop_sequence,
    # the model declined, or paused a long server-side turn: it has finished speaking
    "refusal": StopReason.end_turn,
    "pause_turn": StopReason.end_turn,
}

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
            raise _status_failure(exc) from None
        except anthropic.APIConnectionError as exc:  # APITimeoutError included
            raise AttemptFailed(ErrorKind.timeout, _describe_connection(exc)) from None

        acc = _Accumulator(tools, started, on_event or ignore)
        cut: str | None = None
        try:
            async with stream:
                async for event in stream:
                    acc.feed(event)
        except anthropic.APIStatusError as exc:  # an `event: error` inside the stream
            raise _status_failure(exc) from None
        except Exception as exc:
            if not (isinstance(exc, anthropic.APIConnectionError) or _is_transport_error(exc)):
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


# ---------------------------------------------------------------------------------------------
# request


def build_params(request: ChatRequest) -> dict[str, Any]:
    """Arguments of `messages.create` for `request` (without `stream`, which the call adds)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m) for m in request.messages],
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if request.tool_choice is not None:
        params["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if request.temperature is not None:
        # this SDK version has no `temperature` argument; the API still takes the field
        params["extra_body"] = {"temperature": request.temperature}
    return params


def _message(message: Message) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    # tool results must come first in a user turn
    for result in message.tool_results:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": result.tool_call_id,
            "content": result.content,
        }
        if result.is_error:
            block["is_error"] = True
        content.append(block)
    if message.text.strip():  # a text of whitespace alone is refused
        content.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    if not content:  # an empty answer of the model: a message without content is refused
        content.append({"type": "text", "text": NO_TEXT})
    return {"role": message.role, "content": content}


# ---------------------------------------------------------------------------------------------
# errors


def _status_failure(exc: anthropic.APIStatusError) -> AttemptFailed:
    status = exc.status_code
    error_type = exc.type or ""
    message = exc.api_message or str(exc)
    where = f"HTTP {status}" if status >= 400 else "error event in the stream"
    detail = f"{where} {error_type or 'error'}: {message}"
    if exc.request_id:
        detail += f" (request-id {exc.request_id})"
    if status == 529 or error_type == "overloaded_error":
        return AttemptFailed(ErrorKind.overloaded, detail)
    if status == 429 or error_type == "rate_limit_error":
        return AttemptFailed(
            ErrorKind.rate_limited, detail, retry_after_seconds(exc.response.headers)
        )
    if status == 408:
        return AttemptFailed(ErrorKind.timeout, detail)
    if status == 401 or error_type == "authentication_error":
        return AttemptFailed(ErrorKind.unauthorized, detail)
    if status >= 500 or (status < 400 and error_type in ("api_error", "")):
        return AttemptFailed(ErrorKind.server, detail)
    return AttemptFailed(ErrorKind.bad_request, detail)


def _is_transport_error(exc: BaseException) -> bool:
    """An `httpx.TransportError` or `httpx2.TransportError`, whichever the SDK uses."""
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0] in ("httpx", "httpx2")
        for cls in type(exc).__mro__
    )


def _describe_connection(exc: anthropic.APIConnectionError) -> str:
    cause = exc.__cause__
    reason = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    if isinstance(exc, anthropic.APITimeoutError):
        return f"no answer in time{reason}"
    return f"could not connect{reason}"


# ---------------------------------------------------------------------------------------------
# the event stream


@dataclass(slots=True)
class _Block:
    kind: str  # "text", "tool_use", "thinking" or another block type (ignored)
    tool_id: str = ""
    tool_name: str = ""
    parts: list[str] = field(default_factory=list)
    finished: bool = False


class _Accumulator:
    """Folds the raw stream events into an answer, in arrival order, passing on to
    `emit` what a viewer may show as it comes."""

    def __init__(self, tools: dict[str, ToolSchema], started: float, emit: EventSink) -> None:
        self._tools = tools
        self._emit = emit
        self._started = started
        self._blocks: dict[int, _Block] = {}
        self._order: list[int] = []
        self._tool_calls: list[ToolCall] = []
        self._invalid: list[ToolResult] = []
        self._rejected: list[ToolCall] = []
        self._chars = 0
        self._model = ""
        self._input_tokens = 0
        self._output_tokens = 0
        self._final_output_tokens: int | None = None
        self._first_token: float | None = None
        self._finished_at: float | None = None
        self.stop_reason: StopReason | None = None
        self.stopped = False

    def feed(self, event: object) -> None:
        if isinstance(event, RawMessageStartEvent):
            self._model = event.message.model
            self._input_tokens = event.message.usage.input_tokens
            self._output_tokens = event.message.usage.output_tokens
        elif isinstance(event, RawContentBlockStartEvent):
            self._start_block(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            self._delta(event)
        elif isinstance(event, RawContentBlockStopEvent):
            block = self._blocks.get(event.index)
            if block is not None and not block.finished:
                block.finished = True
                if block.kind == "tool_use":
                    self._finish_tool(block)
        elif isinstance(event, RawMessageDeltaEvent):
            if event.delta.stop_reason is not None:
                self.stop_reason = _STOP_REASONS.get(event.delta.stop_reason, StopReason.end_turn)
            self._output_tokens = event.usage.output_tokens
            self._final_output_tokens = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                self._input_tokens = event.usage.input_tokens
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True
            self._finished_at = time.perf_counter()

    def _start_block(self, event: RawContentBlockStartEvent) -> None:
        content = event.content_block
        block = _Block(kind=content.type)
        self._blocks[event.index] = block
        self._order.append(event.index)
        if isinstance(content, TextBlock):
            self._text_piece(block, content.text)
        elif isinstance(content, ToolUseBlock):
            block.tool_id, block.tool_name = content.id, content.name
            if content.input:  # an input given whole, not in deltas
                self._json_piece(event.index, block, json.dumps(content.input))

    def _text_piece(self, block: _Block, text: str) -> None:
        if text:
            block.parts.append(text)
            self._emit(events.TextDelta(text))

    def _json_piece(self, index: int, block: _Block, piece: str) -> None:
        block.parts.append(piece)
        self._emit(ToolCallDelta(index, block.tool_id, block.tool_name, piece))

    def _delta(self, event: RawContentBlockDeltaEvent) -> None:
        if self._first_token is None:
            self._first_token = time.perf_counter()
        block = self._blocks.get(event.index)
        delta = event.delta
        if isinstance(delta, TextDelta):
            self._chars += len(delta.text)
            if block is not None and block.kind == "text":
                self._text_piece(block, delta.text)
        elif isinstance(delta, InputJSONDelta):
            self._chars += len(delta.partial_json)
            if block is not None and block.kind == "tool_use":
                self._json_piece(event.index, block, delta.partial_json)
        elif isinstance(delta, ThinkingDelta):
            self._chars += len(delta.thinking)  # counted as output, never kept

    def _finish_tool(self, block: _Block) -> None:
        raw = "".join(block.parts)
        bad_json: ValueError | None = None
        try:
            value: Any = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            value, bad_json = None, exc
        tool = self._tools.get(block.tool_name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            self._reject(
                block, value, f"unknown tool {block.tool_name!r} (available tools: {known})"
            )
            return
        if bad_json is not None:
            self._reject(
                block, value, f"tool {tool.name!r}: the input is not valid JSON ({bad_json})"
            )
            return
        problems = validate_schema(value, tool.input_schema)
        if problems:
            self._reject(
                block,
                value,
                f"tool {tool.name!r}: the input does not match its schema: " + "; ".join(problems),
            )
            return
        call = ToolCall(id=block.tool_id, name=tool.name, input=value)
        self._tool_calls.append(call)
        self._emit(ToolCallDone(call))

    def _reject(self, block: _Block, value: object, message: str) -> None:
        self._invalid.append(ToolResult(tool_call_id=block.tool_id, content=message, is_error=True))
        # the call itself, kept in the conversation with its error (the API takes only an
        # object as a tool_use's input)
        given = value if isinstance(value, dict) else {}
        self._rejected.append(
            ToolCall(id=block.tool_id, name=sendable_name(block.tool_name), input=given)
        )

    def progress(self, max_tokens: int) -> tuple[int, int]:
        """(output tokens received, output tokens expected), for the partial rule."""
        received = max(self._output_tokens, math.ceil(self._chars / _CHARS_PER_TOKEN))
        expected = self._final_output_tokens or max_tokens
        return received, max(1, expected)

    def has_content(self) -> bool:
        return bool(self._text() or self._tool_calls)

    def _text(self) -> str:
        return "".join(
            "".join(self._blocks[i].parts) for i in self._order if self._blocks[i].kind == "text"
        )

    def response(self, stop_reason: StopReason, model: str, partial: bool = False) -> ChatResponse:
        finished = self._finished_at if not partial and self._finished_at else time.perf_counter()
        return ChatResponse(
            text=self._text(),
            tool_calls=tuple(self._tool_calls),
            stop_reason=stop_reason,
            usage=Usage(input_tokens=self._input_tokens, output_tokens=self._output_tokens),
            model=self._model or model,
            time_to_first_token=(
                None if self._first_token is None else self._first_token - self._started
            ),
            total_time=finished - self._started,
            invalid_tool_calls=tuple(self._invalid),
            rejected_calls=tuple(self._rejected),
        )
