"""The OpenAI provider: chat completions over a stream, for OpenAI and compatible servers.

Speaks the chat-completions wire format through the official `openai` SDK, so it
also drives OpenAI-compatible local servers (Ollama, vLLM, llama.cpp): it
tolerates a missing usage chunk, tool calls without ids, and any non-empty api
key. The SDK never retries (`max_retries=0`): the error table of seed 001,
Phase 3 (`retry.py`) decides, and every wait goes through the injected `sleep`.

Errors, per the table:

* no answer in time / connection failed before the stream began -> timeout: backoff
* 5xx (not overloaded)                                 -> server: backoff
* 429                                                  -> rate_limited: Retry-After
* 529, or a 503 / in-stream error that says "overloaded" -> overloaded: overloaded_wait
* 401                                                  -> unauthorized: fail at once
* 400 and other 4xx (408 counts as a timeout)          -> bad_request: fail at once
* stream cut off                                       -> see below

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

Tool calls the model makes are checked against the request's tools: malformed
JSON arguments, an unknown tool name, or input that does not match the tool's
input_schema (the subset type / properties / required / items / enum) become
`ChatResponse.invalid_tool_calls` (error tool results), never exceptions.

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
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from ..json_schema import validate_schema
from .events import EventSink, Finished, TextDelta, ToolCallDelta, ToolCallDone, ignore
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

PROVIDER = "openai"

Sleep = Callable[[float], Awaitable[Any]]

_FINISH = {
    "stop": StopReason.end_turn,
    "tool_calls": StopReason.tool_use,
    "function_call": StopReason.tool_use,
    "length": StopReason.max_tokens,
    "content_filter": StopReason.end_turn,
}

# OpenAI echoes a rejected key (masked) in its 401 message: never pass even that on
_KEY_ECHO = re.compile(r"(API key provided:\s*)\S+", re.IGNORECASE)
_MIN_SECRET_LEN = 4  # shorter "keys" (local servers accept "x") are not secrets
_MAX_SCHEMA_ERRORS = 5


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
        acc = _Accumulator(on_event or ignore)
        try:
            stream = await client.chat.completions.create(**params)
        except openai.APIError as exc:
            raise _classify(exc) from None
        try:
            async for chunk in stream:
                acc.add(chunk, started)
        except openai.APIError as exc:
            failure = _classify(exc, chunks=acc.chunks)
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
        return acc.response(request, _stop_reason(acc), started)


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


# ---------------------------------------------------------------- request


def build_params(request: ChatRequest, *, official: bool = False) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for a ChatRequest.

    `official`: OpenAI itself wants `max_completion_tokens` (its reasoning models
    refuse `max_tokens`); compatible servers are sent the widely understood `max_tokens`.
    """
    params: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    params["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
    if request.tool_choice:
        params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    return params


def _tool(tool: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    open_calls: set[str] = set()  # ids the previous assistant turn called
    for msg in request.messages:
        if msg.role == "assistant":
            out.append(_assistant(msg))
            open_calls = {c.id for c in msg.tool_calls}
            continue
        orphans: list[str] = []
        for result in msg.tool_results:
            content = f"Error: {result.content}" if result.is_error else result.content
            if result.tool_call_id in open_calls:
                out.append(
                    {"role": "tool", "tool_call_id": result.tool_call_id, "content": content}
                )
            else:
                # a result for a call the assistant turn does not list (e.g. an invalid
                # call left out of it): a "tool" message would be refused with a 400
                orphans.append(f"[tool call {result.tool_call_id}] {content}")
        text = "\n\n".join([*orphans, msg.text] if msg.text else orphans)
        if text or not msg.tool_results:
            out.append({"role": "user", "content": text or NO_TEXT})
        open_calls = set()
    return out


def _assistant(msg: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
    if msg.tool_calls:
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.input)},
            }
            for c in msg.tool_calls
        ]
    elif not msg.text.strip():  # an empty answer of the model: some servers refuse ""
        entry["content"] = NO_TEXT
    return entry


# ---------------------------------------------------------------- stream


@dataclass(slots=True)
class _Slot:
    """One streamed tool call, assembled from its pieces."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Accumulator:
    emit: EventSink
    text: list[str] = field(default_factory=list)
    slots: dict[int, _Slot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""
    chunks: int = 0
    first_token: float | None = None

    def add(self, chunk: Any, started: float) -> None:
        self.chunks += 1
        if getattr(chunk, "model", None):
            self.model = chunk.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = Usage(
                input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0
            )
        for choice in chunk.choices or ():
            if choice.index != 0:  # n is never set: one choice
                continue
            delta = choice.delta
            if delta is not None:
                self._delta(delta, started)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def _delta(self, delta: Any, started: float) -> None:
        pieces = [p for p in (delta.content, delta.refusal) if p]
        if pieces or delta.tool_calls:
            if self.first_token is None:
                self.first_token = time.monotonic() - started
        for piece in pieces:
            self.text.append(piece)
            self.emit(TextDelta(piece))
        for call in delta.tool_calls or ():
            slot = self.slots.setdefault(call.index, _Slot())
            if call.id and not slot.id:
                slot.id = call.id
            fn = call.function
            if fn is None:
                continue
            if fn.name and fn.name != slot.name:
                # sent once by OpenAI; tolerate servers that repeat it or split it
                slot.name = fn.name if not slot.name else slot.name + fn.name
            if fn.arguments:
                slot.arguments.append(fn.arguments)
                self.emit(ToolCallDelta(call.index, slot.id, slot.name, fn.arguments))

    def response(self, request: ChatRequest, stop: StopReason, started: float) -> ChatResponse:
        valid, invalid, rejected = _check_calls(self.slots, request.tools)
        for call in valid:
            self.emit(ToolCallDone(call))
        return ChatResponse(
            text="".join(self.text),
            tool_calls=tuple(valid),
            stop_reason=stop,
            usage=self.usage or Usage(),
            model=self.model or request.model,
            time_to_first_token=self.first_token,
            total_time=time.monotonic() - started,
            invalid_tool_calls=tuple(invalid),
            rejected_calls=tuple(rejected),
        )


def _stop_reason(acc: _Accumulator) -> StopReason:
    stop = _FINISH.get(acc.finish_reason or "", StopReason.end_turn)
    if stop is StopReason.end_turn and acc.slots:
        # some local servers say "stop" while calling tools: the calls decide
        return StopReason.tool_use
    return stop


def _check_calls(
    slots: dict[int, _Slot], tools: tuple[ToolSchema, ...]
) -> tuple[list[ToolCall], list[ToolResult], list[ToolCall]]:
    """The calls that can run; the errors of those that cannot; and those calls as the
    model made them (input {} when it was no JSON object), kept with their errors."""
    by_name = {t.name: t for t in tools}
    valid: list[ToolCall] = []
    invalid: list[ToolResult] = []
    rejected: list[ToolCall] = []
    for index in sorted(slots):
        slot = slots[index]
        call_id = slot.id or f"call_{uuid.uuid4().hex[:24]}"
        raw = "".join(slot.arguments).strip()
        bad_json: json.JSONDecodeError | None = None
        try:
            value: Any = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            value, bad_json = None, exc
        tool = by_name.get(slot.name)
        problem: str | None = None
        if tool is None:
            known = ", ".join(sorted(by_name)) or "none"
            problem = f"unknown tool {slot.name!r} (available tools: {known})"
        elif bad_json is not None:
            problem = f"tool {slot.name!r}: arguments are not valid JSON ({bad_json}): {raw}"
        elif not isinstance(value, dict):
            problem = f"tool {slot.name!r}: arguments must be a JSON object, got {raw}"
        else:
            problems = validate(value, tool.input_schema)
            if problems:
                shown = "; ".join(problems[:_MAX_SCHEMA_ERRORS])
                problem = f"tool {slot.name!r}: input does not match its schema: {shown}"
        if problem is None:
            valid.append(ToolCall(id=call_id, name=slot.name, input=value))
            continue
        invalid.append(_error(call_id, problem))
        given = value if isinstance(value, dict) else {}
        rejected.append(ToolCall(id=call_id, name=sendable_name(slot.name), input=given))
    return valid, invalid, rejected


def _error(call_id: str, message: str) -> ToolResult:
    return ToolResult(tool_call_id=call_id, content=message, is_error=True)


# ---------------------------------------------------------------- schema


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """What is wrong with `value` against `schema` (the providers' shared subset)."""
    return validate_schema(value, schema, path)


# ---------------------------------------------------------------- errors


def _classify(exc: openai.APIError, *, chunks: int = 0) -> AttemptFailed:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"HTTP {status}: {_server_message(exc)}"
        if status == 429:
            return AttemptFailed(
                ErrorKind.rate_limited, detail, retry_after_seconds(exc.response.headers)
            )
        if status == 529 or (status >= 500 and _says_overloaded(exc)):
            return AttemptFailed(ErrorKind.overloaded, detail)
        if status >= 500:
            return AttemptFailed(ErrorKind.server, detail)
        if status == 408:
            return AttemptFailed(ErrorKind.timeout, detail)
        if status == 401:
            return AttemptFailed(ErrorKind.unauthorized, detail)
        return AttemptFailed(ErrorKind.bad_request, detail)
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        what = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
        if chunks:
            return AttemptFailed(ErrorKind.stream_cut, f"stream {what} after {chunks} chunk(s)")
        return AttemptFailed(ErrorKind.timeout, f"request {what}")
    # an error event inside a 200 stream
    detail = f"error in stream: {_server_message(exc)}"
    if _says_overloaded(exc):
        return AttemptFailed(ErrorKind.overloaded, detail)
    return AttemptFailed(ErrorKind.server, detail)


def _server_message(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _says_overloaded(exc: openai.APIError) -> bool:
    words = [exc.message, str(exc.type or ""), str(exc.code or "")]
    return any("overload" in w.lower() for w in words)


__all__ = ["OpenAIProvider", "build_params", "validate"]
