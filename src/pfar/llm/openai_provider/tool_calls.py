"""The model's tool calls, assembled from the stream and checked against the request's tools.

Malformed JSON arguments, an unknown tool name, or input that does not match the
tool's input_schema (the subset type / properties / required / items / enum)
become `ChatResponse.invalid_tool_calls` (error tool results), never exceptions.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ...json_schema import validate_schema
from ..messages import ToolCall, ToolResult, ToolSchema, sendable_name

_MAX_SCHEMA_ERRORS = 5


@dataclass(slots=True)
class Slot:
    """One streamed tool call, assembled from its pieces."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def check_calls(
    slots: dict[int, Slot], tools: tuple[ToolSchema, ...]
) -> tuple[list[ToolCall], list[ToolResult], list[ToolCall]]:
    """The calls that can run; the errors of those that cannot; and those calls as the
    model made them (input {} when it was no JSON object), kept with their errors."""
    by_name = {t.name: t for t in tools}
    valid: list[ToolCall] = []
    invalid: list[ToolResult] = []
    rejected: list[ToolCall] = []
    for index in sorted(slots):
        slot = slots[index]
        call_id = slot.id or f"call_{uuid.uuid4().hex[:24]}"
        raw = "".join(slot.arguments).strip()
        bad_json: json.JSONDecodeError | None = None
        try:
            value: Any = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            value, bad_json = None, exc
        tool = by_name.get(slot.name)
        problem: str | None = None
        if tool is None:
            known = ", ".join(sorted(by_name)) or "none"
            problem = f"unknown tool {slot.name!r} (available tools: {known})"
        elif bad_json is not None:
            problem = f"tool {slot.name!r}: arguments are not valid JSON ({bad_json}): {raw}"
        elif not isinstance(value, dict):
            problem = f"tool {slot.name!r}: arguments must be a JSON object, got {raw}"
        else:
            problems = validate(value, tool.input_schema)
            if problems:
                shown = "; ".join(problems[:_MAX_SCHEMA_ERRORS])
                problem = f"tool {slot.name!r}: input does not match its schema: {shown}"
        if problem is None:
            valid.append(ToolCall(id=call_id, name=slot.name, input=value))
            continue
        invalid.append(_error(call_id, problem))
        given = value if isinstance(value, dict) else {}
        rejected.append(ToolCall(id=call_id, name=sendable_name(slot.name), input=given))
    return valid, invalid, rejected


def _error(call_id: str, message: str) -> ToolResult:
    return ToolResult(tool_call_id=call_id, content=message, is_error=True)


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """What is wrong with `value` against `schema` (the providers' shared subset)."""
    return validate_schema(value, schema, path)
