"""The pipeline's thinking phases on a real model, through the inference proxy.

Extract and plan get structured output by forcing a tool call whose input
schema is the answer's shape. The planner is shown each allowed tool's name,
description and the JSON Schema of its arguments. A plan that does not match
`submit_plan`'s schema, or whose step a tool refuses (a missing, misnamed or
unknown argument), gets one corrective turn that quotes the complaint, then a
clear failure. The prompts live in `prompts/` next to this module.
"""

from __future__ import annotations

import dataclasses
import json
import string
from collections.abc import Callable
from importlib import resources
from typing import Any

from ..errors import ProviderError
from .messages import ChatRequest, ChatResponse, Message, ToolCall, ToolResult, ToolSchema
from .provider import LLMRequest, LLMResponse
from .proxy import InferenceProxy

METADATA_TOOL = ToolSchema(
    name="record_metadata",
    description="Record what the owner's request is about.",
    input_schema={
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "entities": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["summary"],
    },
)


def plan_tool(tools: list[str]) -> ToolSchema:
    return ToolSchema(
        name="submit_plan",
        description="Submit the plan: the tool calls that carry out the request, in order.",
        input_schema={
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "tool": {"type": "string", "enum": tools},
                            "args": {
                                "type": "object",
                                "description": "the tool's arguments, matching its schema",
                            },
                            "description": {"type": "string"},
                        },
                        "required": ["tool", "args"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["steps"],
            "additionalProperties": False,
        },
    )


# what a tool says about a plan step's arguments: None when it would run them
StepCheck = Callable[[str, dict[str, Any]], str | None]


def tool_listing(names: list[str], tools: dict[str, ToolSchema]) -> str:
    """The plan prompt's list of allowed tools: name, description, arguments' JSON Schema.

    Without the schema a model can only guess argument names from a description
    (it cannot know that `file.write` needs `content`).
    """
    lines = []
    for name in names:
        tool = tools.get(name)
        if tool is None:
            lines.append(f"- {name}")
            continue
        schema = json.dumps(tool.input_schema, sort_keys=True, separators=(",", ":"))
        lines.append(f"- {name}: {tool.description}\n  arguments (JSON Schema): {schema}")
    return "\n".join(lines)


def prompt(name: str, **subs: str) -> str:
    text = resources.files("pfar.llm").joinpath("prompts", f"{name}.md").read_text("utf-8")
    return string.Template(text).safe_substitute(subs)


class ModelProvider:
    """Implements the pipeline's `Provider` on a chat model behind the proxy."""

    name = "model"
    # a call goes to a remote model: the pipeline journals "request sent" before it
    remote = True

    def __init__(
        self,
        proxy: InferenceProxy,
        *,
        model: str,
        max_tokens: int,
        tools: dict[str, ToolSchema] | None = None,
        check_step: StepCheck | None = None,
        tiers: dict[str, str] | None = None,
        remote: bool = True,
    ) -> None:
        self.remote = remote
        self._proxy, self._model, self._max_tokens = proxy, model, max_tokens
        self._tools = tools or {}
        self._check_step = check_step
        self._tiers = {k: v for k, v in (tiers or {}).items() if v}

    def model_for(self, tier: str) -> str:
        """The model of a tier ("cheap", "worker", "planner"); llm.model when unset."""
        return self._tiers.get(tier, self._model)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.phase == "extract":
            return await self._extract(request)
        if request.phase == "plan":
            return await self._plan(request)
        return await self._synthesize(request)

    async def _chat(self, req: LLMRequest, chat: ChatRequest) -> ChatResponse:
        chat = dataclasses.replace(
            chat,
            context={
                "phase": req.phase,
                "template_id": req.template_id,
                "input_text": req.input_text,
                "task_id": req.task_id,
                "metadata": req.metadata,
                "step_results": req.step_results,
                "tools": req.tools,
            },
        )
        return await self._proxy.chat(
            chat,
            task_id=req.task_id,
            data_label=req.data_label,
            cloud_approved=req.cloud_approved,
            priority=req.priority,
        )

    def _request(
        self,
        system: str,
        messages: tuple[Message, ...],
        tool: ToolSchema | None = None,
        tier: str = "worker",
        *,
        attempt_timeout: float | None = None,
    ) -> ChatRequest:
        return ChatRequest(
            model=self.model_for(tier),
            system=system,
            messages=messages,
            tools=(tool,) if tool else (),
            max_tokens=self._max_tokens,
            tool_choice=tool.name if tool else None,
            attempt_timeout=attempt_timeout,
        )

    async def _extract(self, req: LLMRequest) -> LLMResponse:
        chat = self._request(
            prompt("extract"),
            (Message("user", req.input_text),),
            METADATA_TOOL,
            tier="cheap",
            attempt_timeout=req.attempt_timeout,
        )
        resp = await self._chat(req, chat)
        call = _the_call(resp, METADATA_TOOL.name)
        if call is None:  # metadata is a convenience: fall back to the request itself
            return LLMResponse(data={"summary": req.input_text[:200]})
        return LLMResponse(data=call.input)

    async def _plan(self, req: LLMRequest) -> LLMResponse:
        tool = plan_tool(req.tools)
        system = prompt("plan", tools=tool_listing(req.tools, self._tools))
        messages: tuple[Message, ...] = (Message("user", req.input_text),)
        # the worker tier, its one correction, then (when configured) the planner tier
        tiers = ["worker", "worker"]
        if self.model_for("planner") != self.model_for("worker"):
            tiers.append("planner")
        for attempt, tier in enumerate(tiers, start=1):
            chat = self._request(system, messages, tool, tier, attempt_timeout=req.attempt_timeout)
            resp = await self._chat(req, chat)
            call = _the_call(resp, tool.name)
            refused = self._refused_steps(call.input) if call is not None else []
            if call is not None and not refused:
                return LLMResponse(data=call.input)
            problem = "; ".join(refused) if refused else _why_not(resp, tool.name)
            if attempt == len(tiers):
                raise ProviderError(f"the model gave no valid plan after a correction: {problem}")
            # one corrective turn: show the model what was wrong and ask again
            messages = (*messages, *_correction(resp, call, problem, tool.name))
        raise AssertionError("unreachable")

    def _refused_steps(self, plan: dict[str, Any]) -> list[str]:
        """Each step whose tool refuses its arguments, with the tool's own words."""
        if self._check_step is None:
            return []
        refused = []
        for i, step in enumerate(plan.get("steps") or [], start=1):
            name, args = str(step.get("tool")), step.get("args")
            complaint = self._check_step(name, args if isinstance(args, dict) else {})
            if complaint is not None:
                refused.append(f"step {i} ({name}): {complaint}")
        return refused

    async def _synthesize(self, req: LLMRequest) -> LLMResponse:
        results = json.dumps(req.step_results, sort_keys=True, default=str)[:20_000]
        chat = self._request(
            prompt("synthesize"),
            (Message("user", f"Request: {req.input_text}\n\nStep results: {results}"),),
            attempt_timeout=req.attempt_timeout,
        )
        resp = await self._chat(req, chat)
        return LLMResponse(text=resp.text.strip() or "Done.")


def _the_call(resp: ChatResponse, name: str) -> ToolCall | None:
    return next((c for c in resp.tool_calls if c.name == name), None)


def _correction(
    resp: ChatResponse, call: ToolCall | None, problem: str, name: str
) -> tuple[Message, Message]:
    """The corrective turn: the model's answer, then what was wrong with it."""
    if call is not None:  # a well-formed plan a tool refused: answer the call with its complaint
        return (
            Message("assistant", resp.text, tool_calls=(call,)),
            Message(
                "user",
                f"Call {name} once with a corrected plan: each step's args must match its "
                "tool's JSON Schema in the list of tools.",
                tool_results=(
                    ToolResult(call.id, f"That plan cannot run: {problem}", is_error=True),
                ),
            ),
        )
    bad = resp.invalid_tool_calls[0] if resp.invalid_tool_calls else None
    return (
        Message("assistant", resp.text or "(no plan)"),
        Message(
            "user",
            f"That was not a valid plan: {problem}. Call {name} once with a valid plan."
            + (f" ({bad.content})" if bad else ""),
        ),
    )


def _why_not(resp: ChatResponse, name: str) -> str:
    errors = [r.content for r in resp.invalid_tool_calls]
    if errors:
        return "; ".join(errors)
    return f"it did not call {name} (stop reason {resp.stop_reason.value})"


__all__ = [
    "METADATA_TOOL",
    "ModelProvider",
    "StepCheck",
    "ToolResult",
    "plan_tool",
    "prompt",
    "tool_listing",
]
