"""The Messages API's raw stream events folded into a `ChatResponse`.

* text blocks are joined into `text`; thinking blocks (their text and signature) and
  redacted_thinking blocks are kept whole, apart, in `thinking`: never in the text;
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
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import ThinkingBlock as ApiThinkingBlock

from ...json_schema import validate_schema
from .. import events
from ..events import EventSink, ToolCallDelta, ToolCallDone
from ..messages import (
    ChatResponse,
    StopReason,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
    sendable_name,
)

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


@dataclass(slots=True)
class _Block:
    kind: str  # "text", "tool_use", "thinking" or another block type (ignored)
    tool_id: str = ""
    tool_name: str = ""
    parts: list[str] = field(default_factory=list)
    finished: bool = False
    signature: str = ""  # a thinking block's
    data: str = ""  # a redacted_thinking block's


class Accumulator:
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
        elif isinstance(content, ApiThinkingBlock):
            block.parts.append(content.thinking)
            block.signature = content.signature
        elif isinstance(content, RedactedThinkingBlock):
            block.data = content.data
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
            self._chars += len(delta.thinking)  # counted as output; kept apart from the text
            if block is not None and block.kind == "thinking":
                block.parts.append(delta.thinking)
        elif isinstance(delta, SignatureDelta):
            if block is not None and block.kind == "thinking":
                block.signature += delta.signature

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
            thinking=self._thinking(),
        )

    def _thinking(self) -> tuple[ThinkingBlock, ...]:
        """The answer's thinking blocks, whole, in their order."""
        out = []
        for i in self._order:
            block = self._blocks[i]
            if block.kind == "thinking":
                text = "".join(block.parts)
                out.append(ThinkingBlock("thinking", thinking=text, signature=block.signature))
            elif block.kind == "redacted_thinking":
                out.append(ThinkingBlock("redacted_thinking", data=block.data))
        return tuple(out)
