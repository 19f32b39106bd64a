"""A script's `[[responses]]`: answers to the pipeline's phases (extract, plan, synthesize).

A pipeline phase's request says what it asks for in `ChatRequest.context` (phase,
template, the task's input, metadata, step results). A response is chosen by
(template, phase, optional regex on the task's input), never by call order, so a
phase retried after a crash gets the same answer. It comes back the way a model
answers the phase: as a call of the request's forced tool (extract, plan) or as
text (synthesize). See docs/scripts.md for the format.
"""

from __future__ import annotations

import asyncio
import json
import string
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ProviderError
from .messages import ChatRequest, ChatResponse, ToolCall, Usage
from .scripted import Matcher, reply

PHASES = ("extract", "plan", "synthesize")


class ScriptedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phase: str = Field(pattern="^(extract|plan|synthesize)$")
    template: str = "*"
    match: str | None = None
    json_: dict[str, Any] | None = Field(default=None, alias="json")
    text: str | None = None
    # the usage the answer reports (what its model call costs, as a provider's would)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    delay_seconds: float = Field(0, ge=0)
    error: str | None = None  # answer with a provider error instead


@dataclass(frozen=True, slots=True)
class CompiledResponse:
    spec: ScriptedResponse
    match: Matcher | None


def compile_responses(responses: list[ScriptedResponse], source: str) -> list[CompiledResponse]:
    return [
        CompiledResponse(r, Matcher(r.match, source, f"responses.{i}.match") if r.match else None)
        for i, r in enumerate(responses)
    ]


async def answer_phase(
    responses: list[CompiledResponse], request: ChatRequest, source: str
) -> ChatResponse:
    """The script's answer to one phase's request; a default when no response matches."""
    ctx = request.context
    phase = str(ctx.get("phase"))
    if phase not in PHASES:
        raise ProviderError(f"scripted provider: unknown phase {phase!r}")
    template, input_text = str(ctx.get("template_id", "")), str(ctx.get("input_text", ""))
    found = None
    for c in responses:
        r = c.spec
        if r.phase != phase or r.template not in ("*", template):
            continue
        if c.match is not None and not await c.match.search(input_text):
            continue
        found = r
        break
    if found is None:
        return _as_answer(request, *_default(ctx, phase, source))
    if found.delay_seconds:
        await asyncio.sleep(found.delay_seconds)
    if found.error:
        raise ProviderError(f"scripted provider: {found.error}")
    subs = _substitutions(ctx)
    usage = Usage(found.input_tokens, found.output_tokens)
    if found.json_ is not None:
        return _as_answer(request, fill(found.json_, subs), None, usage)
    return _as_answer(request, None, fill(found.text or "", subs), usage)


def _as_answer(
    request: ChatRequest,
    data: dict[str, Any] | None,
    text: str | None,
    usage: Usage | None = None,
) -> ChatResponse:
    """A tool call when the request forces one (extract, plan), else text (synthesize)."""
    if request.tool_choice is not None:
        call = ToolCall(
            f"scripted_{request.context.get('phase')}_{len(request.messages)}",
            request.tool_choice,
            data if data is not None else {"text": text or ""},
        )
        return reply(request, tool_calls=(call,), usage=usage)
    return reply(request, text if text is not None else json.dumps(data), usage=usage)


def _default(
    ctx: dict[str, Any], phase: str, source: str
) -> tuple[dict[str, Any] | None, str | None]:
    if phase == "extract":
        return {"text": str(ctx.get("input_text", ""))}, None
    if phase == "synthesize":
        steps = len(ctx.get("step_results") or [])
        return None, f"Done: {ctx.get('template_id', '')} ({steps} steps)."
    raise ProviderError(
        f"scripted provider: {source} has no plan for template {ctx.get('template_id', '')!r}"
    )


def _substitutions(ctx: dict[str, Any]) -> dict[str, str]:
    subs = {
        "input": str(ctx.get("input_text", "")),
        "task_id": str(ctx.get("task_id", "")),
        "template": str(ctx.get("template_id", "")),
    }
    for i, result in enumerate(ctx.get("step_results") or []):
        subs[f"step{i}"] = as_text(result)
    for key, value in (ctx.get("metadata") or {}).items():
        subs[f"meta_{key}"] = as_text(value)
    return subs


def as_text(value: Any) -> str:
    """A value as a script's `$name` stands for it: a result's body, stdout, content or
    text when it has one, a string as it is, anything else as JSON."""
    if isinstance(value, dict):
        for key in ("body", "stdout", "content", "text"):
            if isinstance(value.get(key), str):
                return str(value[key]).strip()
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def fill(value: Any, subs: dict[str, str]) -> Any:
    """`value` with `$name` replaced in every string in it (unknown names left as they are)."""
    if isinstance(value, str):
        return string.Template(value).safe_substitute(subs) if "$" in value else value
    if isinstance(value, dict):
        return {k: fill(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, subs) for v in value]
    return value
