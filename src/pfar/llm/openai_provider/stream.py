"""The chat-completions stream folded into a `ChatResponse`, passing on events as it goes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..events import EventSink, TextDelta, ToolCallDelta, ToolCallDone
from ..messages import ChatRequest, ChatResponse, StopReason, Usage
from .tool_calls import Slot, check_calls

_FINISH = {
    "stop": StopReason.end_turn,
    "tool_calls": StopReason.tool_use,
    "function_call": StopReason.tool_use,
    "length": StopReason.max_tokens,
    "content_filter": StopReason.end_turn,
}


@dataclass(slots=True)
class Accumulator:
    """The answer so far, chunk by chunk, passing on to `emit` what a viewer may show."""

    emit: EventSink
    text: list[str] = field(default_factory=list)
    slots: dict[int, Slot] = field(default_factory=dict)
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
            slot = self.slots.setdefault(call.index, Slot())
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
        valid, invalid, rejected = check_calls(self.slots, request.tools)
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


def stop_reason(acc: Accumulator) -> StopReason:
    stop = _FINISH.get(acc.finish_reason or "", StopReason.end_turn)
    if stop is StopReason.end_turn and acc.slots:
        # some local servers say "stop" while calling tools: the calls decide
        return StopReason.tool_use
    return stop
