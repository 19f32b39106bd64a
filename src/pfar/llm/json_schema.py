"""The JSON Schema subset the model providers check tool input against.

Understood: type (one or a list), enum, properties, required,
additionalProperties (false or a schema), items. Other keywords are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def validate_schema(value: object, schema: dict[str, Any], path: str = "input") -> list[str]:
    """What is wrong with `value` against `schema` (empty: it matches).

    Understood: type (one or a list), enum, properties, required, additionalProperties
    (false or a schema), items. Other keywords are ignored (accepted).
    """
    problems: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        checks = [_TYPE_CHECKS.get(n) for n in names]
        if not any(check is None or check(value) for check in checks):
            return [f"{path} should be {' or '.join(map(str, names))}, not {_json_type(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        problems.append(f"{path} should be one of {allowed}, not {json.dumps(value)}")
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                problems.append(f"{path} is missing the required property {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                problems += validate_schema(item, props[name], f"{path}.{name}")
            elif extra is False:
                problems.append(f"{path} has an unexpected property {name!r}")
            elif isinstance(extra, dict):
                problems += validate_schema(item, extra, f"{path}.{name}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += validate_schema(item, schema["items"], f"{path}[{i}]")
    return problems


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
