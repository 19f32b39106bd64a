"""What a model call streams while it answers: typed events, in arrival order.

A call given an `on_event` sink (`InferenceProxy.chat`, or a provider's `chat`) hands
it these as they arrive, and still returns the whole `ChatResponse`:

    TextDelta*  ToolCallDelta*  ToolCallDone*  ...  Finished

* `TextDelta`: a piece of the answer's text, to forward to a viewer as it comes;
* `ToolCallDelta`: a piece of a tool call's input JSON (`index` tells the calls apart);
* `ToolCallDone`: a tool call whose input arrived whole and matches its tool's schema
  (a call that does not is left out: it is in the response's `invalid_tool_calls`);
* `Retrying`: the attempt failed and the error table retries it: everything streamed
  since the last `Retrying` (or the start) is void; the next attempt streams afresh;
* `Finished`: the last event, once: the whole response (stop reason, usage), exactly
  what the call returns.

Thinking is never streamed: it stays out of the conversation. A call that fails for
good raises after its last `Retrying`, with no `Finished`.

The sink is called synchronously from the call's own task: it must not block (a
viewer on the far side of a socket queues and sends from its own task).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .messages import ChatResponse, ToolCall


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of tool call `index`'s input JSON; `id` and `name` as far as known."""

    index: int
    id: str
    name: str
    input_json: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    call: ToolCall
    kind: Literal["tool_call_done"] = "tool_call_done"


@dataclass(frozen=True, slots=True)
class Retrying:
    """Attempt `attempt` (1-based) failed with `reason` (an `ErrorKind` value); the next
    one starts after `wait` seconds. What the failed attempt streamed is void."""

    attempt: int
    reason: str
    detail: str
    wait: float
    kind: Literal["retrying"] = "retrying"


@dataclass(frozen=True, slots=True)
class Finished:
    response: ChatResponse
    kind: Literal["finished"] = "finished"


ChatEvent = TextDelta | ToolCallDelta | ToolCallDone | Retrying | Finished

EventSink = Callable[[ChatEvent], None]


def ignore(event: ChatEvent) -> None:
    """The sink of a call nobody watches."""


def replay(response: ChatResponse, on_event: EventSink) -> None:
    """Stream a whole response: its text as one delta, its calls, then `Finished`
    (a model that answers at once, such as a script, streams this way)."""
    if response.text:
        on_event(TextDelta(response.text))
    for call in response.tool_calls:
        on_event(ToolCallDone(call))
    on_event(Finished(response))


__all__ = [
    "ChatEvent",
    "EventSink",
    "Finished",
    "Retrying",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallDone",
    "ignore",
    "replay",
]
