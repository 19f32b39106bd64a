"""A `ChatRequest` as the keyword arguments of the chat-completions call."""

from __future__ import annotations

import json
from typing import Any

from ..messages import NO_TEXT, ChatRequest, Message, ToolSchema


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
