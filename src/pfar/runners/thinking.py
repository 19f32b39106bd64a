"""The pipeline's thinking phases as calls of the chat interface (the inference proxy).

Each phase builds a `ChatRequest` from its prompt (`llm/prompts/`) and the task, sends
it through the proxy and reads the answer:

* extract: a forced call of `record_metadata` (the cheap tier); no call: the input's
  first 200 characters as the summary;
* plan: a forced call of `submit_plan`, whose schema is the plan's shape. The planner
  is shown each allowed tool's name, description and the JSON Schema of its arguments.
  A plan that does not match the schema, or whose step a tool refuses (a missing,
  misnamed or unknown argument), gets one corrective turn that quotes the complaint;
  then, when a planner tier is configured, one more try on it; then a clear failure;
* synthesize: prose from the request and the step results.

The request's `context` names the phase, the template and what the phase was given,
so a scripted model can answer it (real models ignore it).
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from ..errors import ProviderError, ToolFailed
from ..llm.messages import ChatRequest, ChatResponse, Message, ToolCall, ToolResult, ToolSchema
from ..llm.proxy import InferenceProxy
from ..tools.registry import ToolRegistry

Phase = Literal["extract", "plan", "synthesize"]

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


@dataclass(frozen=True, slots=True)
class PhaseInput:
    """What a thinking phase is given about its task."""

    task_id: str
    template_id: str
    input_text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)  # the template's allowed tools
    data_label: str = "internal"  # the task's data: decides whether it may go to the cloud
    cloud_approved: bool = False  # the owner approved sending it to the cloud anyway
    priority: int = 0  # at the shared rate limit, higher goes first
    # seconds each attempt of each model call may take (retry waits not included)
    attempt_timeout: float | None = None


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


def tool_schemas(tools: ToolRegistry) -> dict[str, ToolSchema]:
    """What the planner is shown of each tool: name, description, its arguments' schema."""
    return {t.name: ToolSchema(t.name, t.description, t.args_schema) for t in tools}


def step_check(tools: ToolRegistry) -> StepCheck:
    """A plan step as its tool sees it: the tool's own `validate()` complaint, or None."""

    def check(name: str, args: dict[str, object]) -> str | None:
        if name not in tools:
            return f"unknown tool {name!r}"
        try:
            tools.get(name).validate(dict(args))
        except ToolFailed as exc:
            return str(exc)
        return None

    return check


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
    return _prompt_template(name).safe_substitute(subs)


@functools.cache
def _prompt_template(name: str) -> string.Template:
    """A prompt file, read once: it ships with pfar and does not change while it runs."""
    text = resources.files("pfar.llm").joinpath("prompts", f"{name}.md").read_text("utf-8")
    return string.Template(text)


# -- the phases ---------------------------------------------------------------------------


async def extract(ask: PhaseInput, model: InferenceProxy) -> dict[str, Any]:
    """The request's metadata."""
    resp = await _send(
        ask,
        model,
        "extract",
        prompt("extract"),
        (Message("user", ask.input_text),),
        METADATA_TOOL,
        tier="cheap",
    )
    call = _the_call(resp, METADATA_TOOL.name)
    if call is None:  # metadata is a convenience: fall back to the request itself
        return {"summary": ask.input_text[:200]}
    return call.input


async def plan(ask: PhaseInput, model: InferenceProxy, tools: ToolRegistry) -> dict[str, Any]:
    """The plan's data (`{"steps": [...]}`), every step accepted by its tool."""
    tool = plan_tool(ask.tools)
    system = prompt("plan", tools=tool_listing(ask.tools, tool_schemas(tools)))
    check = step_check(tools)
    messages: tuple[Message, ...] = (Message("user", ask.input_text),)
    # the worker tier, its one correction, then (when configured) the planner tier
    tiers = ["worker", "worker"]
    if model.model_for("planner") != model.model_for("worker"):
        tiers.append("planner")
    for attempt, tier in enumerate(tiers, start=1):
        resp = await _send(ask, model, "plan", system, messages, tool, tier=tier)
        call = _the_call(resp, tool.name)
        refused = _refused_steps(call.input, check) if call is not None else []
        if call is not None and not refused:
            return call.input
        problem = "; ".join(refused) if refused else _why_not(resp, tool.name)
        if attempt == len(tiers):
            raise ProviderError(f"the model gave no valid plan after a correction: {problem}")
        # one corrective turn: show the model what was wrong and ask again
        messages = (*messages, *_correction(resp, call, problem, tool.name))
    raise AssertionError("unreachable")


async def synthesize(ask: PhaseInput, model: InferenceProxy, step_results: list[Any]) -> str:
    """The owner's answer: what was done and what came of it."""
    results = json.dumps(step_results, sort_keys=True, default=str)[:20_000]
    resp = await _send(
        ask,
        model,
        "synthesize",
        prompt("synthesize"),
        (Message("user", f"Request: {ask.input_text}\n\nStep results: {results}"),),
        step_results=step_results,
    )
    return resp.text.strip() or "Done."


async def _send(
    ask: PhaseInput,
    model: InferenceProxy,
    phase: Phase,
    system: str,
    messages: tuple[Message, ...],
    tool: ToolSchema | None = None,
    *,
    tier: str = "worker",
    step_results: list[Any] | None = None,
) -> ChatResponse:
    request = ChatRequest(
        model=model.model_for(tier),
        system=system,
        messages=messages,
        tools=(tool,) if tool else (),
        max_tokens=model.max_tokens,
        tool_choice=tool.name if tool else None,
        attempt_timeout=ask.attempt_timeout,
        context={
            "phase": phase,
            "template_id": ask.template_id,
            "input_text": ask.input_text,
            "task_id": ask.task_id,
            "metadata": ask.metadata,
            "step_results": step_results or [],
            "tools": ask.tools,
        },
    )
    return await model.chat(
        request,
        task_id=ask.task_id,
        data_label=ask.data_label,
        cloud_approved=ask.cloud_approved,
        priority=ask.priority,
    )


def _refused_steps(plan: dict[str, Any], check: StepCheck) -> list[str]:
    """Each step whose tool refuses its arguments, with the tool's own words."""
    refused = []
    for i, step in enumerate(plan.get("steps") or [], start=1):
        name, args = str(step.get("tool")), step.get("args")
        complaint = check(name, args if isinstance(args, dict) else {})
        if complaint is not None:
            refused.append(f"step {i} ({name}): {complaint}")
    return refused


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
