"""The one JSON Schema checker: model providers check tool calls with it, tools their arguments.

It lives at the package's top so both rooms may use it: a tool's `args_schema` is
what the planner is shown and what the tool's own `validate()` checks, so the two
cannot drift apart.

Understood: type (one or a list), enum, properties, required, additionalProperties
(false or a schema), items, minItems, minLength, minimum, maximum, exclusiveMinimum,
and `not` around a `required` list (two arguments that exclude each other). Other
keywords (description, default, ...) are accepted and ignored.
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
    """What is wrong with `value` against `schema` (empty: it matches), each naming its path."""
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
        problems += _object(value, schema, path)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path} should have at least {schema['minItems']} item(s)")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problems += validate_schema(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        problems.append(f"{path} should have at least {schema['minLength']} character(s)")
    if isinstance(value, int | float) and not isinstance(value, bool):
        problems += _bounds(value, schema, path)
    return problems


def _object(value: dict[Any, Any], schema: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    props: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            problems.append(f"{path} is missing the required property {name!r}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in props:
            problems += validate_schema(item, props[name], f"{path}.{name}")
        elif extra is False:
            known = ", ".join(props) or "none"
            problems.append(f"{path} has an unexpected property {name!r} (known: {known})")
        elif isinstance(extra, dict):
            problems += validate_schema(item, extra, f"{path}.{name}")
    excluded = (schema.get("not") or {}).get("required")
    if excluded and all(name in value for name in excluded):
        names = " and ".join(repr(n) for n in excluded)
        problems.append(f"{path} may not have both {names}: give one")
    return problems


def _bounds(value: float, schema: dict[str, Any], path: str) -> list[str]:
    if "minimum" in schema and value < schema["minimum"]:
        return [f"{path} should be at least {schema['minimum']}, not {value}"]
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return [f"{path} should be more than {schema['exclusiveMinimum']}, not {value}"]
    if "maximum" in schema and value > schema["maximum"]:
        return [f"{path} should be at most {schema['maximum']}, not {value}"]
    return []


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
