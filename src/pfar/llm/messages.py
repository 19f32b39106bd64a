"""What real providers exchange: a conversation, tool schemas, and a streamed answer.

Provider-neutral records: the Anthropic and OpenAI-compatible providers map
them to and from their SDKs; the pipeline and the inference proxy see only
these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool the model may call: its name, what it does, and a JSON Schema for its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: str
    is_error: bool = False


# what both APIs take as a tool's name, in a request's tools and in the calls it sends back
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def sendable_name(name: str) -> str:
    """A called tool's name as it may be sent back to the API: a model can call a tool
    with a name no tool may have (spaces, dots, nothing), which the API would refuse."""
    if _TOOL_NAME.fullmatch(name):
        return name
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "unnamed"


# what a message with nothing to say carries: the APIs refuse a message without content
# (and Anthropic a text of whitespace) anywhere but as the last assistant message
NO_TEXT = "(no text)"


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """A block of a model's extended thinking, exactly as the API sent it: `thinking`
    with its text and `signature`, or `redacted_thinking` with its encrypted `data`.
    Sent back unchanged (the API checks the signature) in the requests that follow it
    in a tool-use exchange; never part of the answer's text."""

    kind: Literal["thinking", "redacted_thinking"]
    thinking: str = ""
    signature: str = ""
    data: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """One turn. `text`, plus tool calls (assistant) or tool results (user); an
    assistant's `thinking` blocks go back only to a provider that takes them."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    thinking: tuple[ThinkingBlock, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    # extended thinking's budget (tokens, less than max_tokens) for a provider that has it
    # (Anthropic's); None: no thinking. A request that thinks sets no temperature
    thinking_budget: int | None = None
    # force a call of this tool (structured output for the extract and plan phases)
    tool_choice: str | None = None
    # seconds one attempt (the request and its whole answer) may take; the waits between
    # retries are not part of it (the template's `[timeouts] llm_seconds`)
    attempt_timeout: float | None = None
    # what the pipeline asked for (phase, template, input, step results): providers that
    # answer from a script rather than a model read it; real ones ignore it
    context: dict[str, Any] = field(default_factory=dict)
    # its input in tokens as the caller measured it (a loop turn's fit, which a real count
    # may have made), so the shared limit and the spend gate need not size it again;
    # None: they estimate it (llm/tokens.py)
    input_tokens: int | None = None


class StopReason(StrEnum):
    end_turn = "end_turn"
    tool_use = "tool_use"
    max_tokens = "max_tokens"
    stop_sequence = "stop_sequence"
    partial = "partial"  # the stream was cut off after more than half had arrived


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A whole answer. Thinking is never part of its text: it comes as its own blocks
    (`thinking`), kept only to be sent back as the API requires and to be shown as
    thinking, never to the owner as the answer."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    stop_reason: StopReason
    usage: Usage
    model: str
    time_to_first_token: float | None = None  # seconds
    total_time: float = 0.0  # seconds
    # tool calls the model made that could not be used (bad JSON, unknown tool,
    # input not matching the schema): returned to the model as error tool results
    invalid_tool_calls: tuple[ToolResult, ...] = field(default=())
    # those calls as the model made them (its name; its input, or {} when that was no
    # JSON object), one per error above: kept in the conversation with their errors
    rejected_calls: tuple[ToolCall, ...] = field(default=())
    # the answer's thinking blocks, in the order they came
    thinking: tuple[ThinkingBlock, ...] = field(default=())
