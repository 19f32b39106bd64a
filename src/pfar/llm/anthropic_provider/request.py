"""A `ChatRequest` as the arguments of the Messages API's `messages.create`."""

from __future__ import annotations

from typing import Any

from ..messages import NO_TEXT, ChatRequest, Message, ThinkingBlock


def build_params(request: ChatRequest) -> dict[str, Any]:
    """Arguments of `messages.create` for `request` (without `stream`, which the call adds)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m, request.thinking_budget is not None) for m in request.messages],
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if request.tool_choice is not None:
        params["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if request.thinking_budget is not None:
        # extended thinking; the API takes no temperature with it (nor a forced tool)
        params["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
    elif request.temperature is not None:
        # this SDK version has no `temperature` argument; the API still takes the field
        params["extra_body"] = {"temperature": request.temperature}
    return params


def _message(message: Message, thinks: bool) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinks:
        # an answer's thinking goes back first, unchanged (the API checks its signature)
        content.extend(_thinking(b) for b in message.thinking if b.signature or b.data)
    # tool results must come first in a user turn
    for result in message.tool_results:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": result.tool_call_id,
            "content": result.content,
        }
        if result.is_error:
            block["is_error"] = True
        content.append(block)
    if message.text.strip():  # a text of whitespace alone is refused
        content.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    if not content:  # an empty answer of the model: a message without content is refused
        content.append({"type": "text", "text": NO_TEXT})
    return {"role": message.role, "content": content}


def _thinking(block: ThinkingBlock) -> dict[str, Any]:
    if block.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
