"""A script's `[[turns]]`: the model's side of multi-turn, tool-using conversations.

Each request is answered from the conversation it carries, never from a call count,
so a call made again after a crash gets the same answer: the first turn, in file
order, whose conditions all hold answers it.

* `turn`: the model's n-th turn in this conversation (1 + the assistant messages so far);
* `match`: a regex searched in the conversation's first user message (the task's input);
* `last`: a regex searched in the last message (its text and its tool results);
* `after_tool`: the last message holds the result of a call to this tool.

A turn answers with `text` and/or `tool_calls`; strings in them may use `$input` (the
first user message), `$last` (the last message, as `last` sees it) and `$turn`. See
docs/scripts.md for the format.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ProviderError
from .messages import ChatRequest, ChatResponse, Message, StopReason, ToolCall, Usage
from .phase_script import fill
from .scripted import Matcher, reply


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    input: dict[str, Any] = {}
    id: str | None = None  # default: call_<turn>_<n>, the same on every replay


class ScriptedTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int | None = Field(default=None, ge=1)
    match: str | None = None
    last: str | None = None
    after_tool: str | None = None
    text: str = ""
    tool_calls: list[ScriptedCall] = []
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "stop_sequence"] | None = None
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    delay_seconds: float = Field(default=0, ge=0)
    error: str | None = None  # answer with a provider error instead


@dataclass(frozen=True, slots=True)
class CompiledTurn:
    spec: ScriptedTurn
    match: Matcher | None
    last: Matcher | None


def compile_turns(turns: list[ScriptedTurn], source: str) -> list[CompiledTurn]:
    return [
        CompiledTurn(
            t,
            Matcher(t.match, source, f"turns.{i}.match") if t.match else None,
            Matcher(t.last, source, f"turns.{i}.last") if t.last else None,
        )
        for i, t in enumerate(turns)
    ]


@dataclass(frozen=True, slots=True)
class _Conversation:
    turn: int
    first: str
    last: str
    last_tools: frozenset[str]

    @classmethod
    def of(cls, messages: tuple[Message, ...]) -> _Conversation:
        called = {c.id: c.name for m in messages for c in m.tool_calls}
        final = messages[-1] if messages else Message("user")
        return cls(
            turn=1 + sum(1 for m in messages if m.role == "assistant"),
            first=next((m.text for m in messages if m.role == "user"), ""),
            last="\n".join([final.text, *(r.content for r in final.tool_results)]).strip(),
            last_tools=frozenset(
                called[r.tool_call_id] for r in final.tool_results if r.tool_call_id in called
            ),
        )


async def _holds(c: CompiledTurn, convo: _Conversation) -> bool:
    t = c.spec
    if t.turn is not None and t.turn != convo.turn:
        return False
    if t.after_tool is not None and t.after_tool not in convo.last_tools:
        return False
    if c.match is not None and not await c.match.search(convo.first):
        return False
    return c.last is None or await c.last.search(convo.last)


async def answer_turn(turns: list[CompiledTurn], request: ChatRequest, source: str) -> ChatResponse:
    convo = _Conversation.of(request.messages)
    found = None
    for c in turns:
        if await _holds(c, convo):
            found = c.spec
            break
    if found is None:
        raise ProviderError(
            f"scripted provider: {source} has no turn for model turn {convo.turn} of this "
            f"conversation (last message: {convo.last[:200]!r})"
        )
    if found.delay_seconds:
        await asyncio.sleep(found.delay_seconds)
    if found.error:
        raise ProviderError(f"scripted provider: {found.error}")
    subs = {"input": convo.first, "last": convo.last, "turn": str(convo.turn)}
    calls = [
        ToolCall(call.id or f"call_{convo.turn}_{i}", call.name, fill(call.input, subs))
        for i, call in enumerate(found.tool_calls, start=1)
    ]
    return reply(
        request,
        fill(found.text, subs),
        calls,
        StopReason(found.stop_reason) if found.stop_reason else None,
        Usage(found.input_tokens, found.output_tokens),
    )
