"""Parse a JSON object into a request record, once, at the edge: each field is checked
against the record's annotation, and a refusal names the field. A value of the wrong
type is refused, never converted: `true` is not the string "True", `[1]` not "[1]"."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from ...errors import BadRequest

R = TypeVar("R")


def parse_fields(cls: type[R], body: Mapping[str, Any]) -> R:
    """An instance of the dataclass `cls` from `body`. A field that is missing (or null)
    takes its default; without one it is required. Keys `cls` has no field for are
    ignored (the request's "op" among them).

    Raises:
        BadRequest: naming the first field that is missing or of the wrong type.
    """
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = body.get(f.name)
        if value is None:
            if f.default is dataclasses.MISSING:
                raise BadRequest(f.name, "is required")
            continue
        values[f.name] = _checked(f.name, hints[f.name], value)
    return cls(**values)


def _checked(name: str, hint: Any, value: object) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise BadRequest(name, f"must be a list, not {_kind(value)}")
        item = typing.get_args(hint)[0]
        return tuple(_checked(f"{name}[{i}]", item, v) for i, v in enumerate(value))
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        text = _checked(name, str, value)
        if text not in hint._value2member_map_:
            known = ", ".join(m.value for m in hint)
            raise BadRequest(name, f"{text!r} is not one of {known}")
        return hint(text)
    if hint is bool and not isinstance(value, bool):
        raise BadRequest(name, f"must be true or false, not {_kind(value)}")
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise BadRequest(name, f"must be an integer, not {_kind(value)}")
    if hint is str and not isinstance(value, str):
        raise BadRequest(name, f"must be a string, not {_kind(value)}")
    if hint not in (str, int, bool):
        raise TypeError(f"{name}: no parser for a field of type {hint!r}")
    return value


def _kind(value: object) -> str:
    return type(value).__name__
