"""Did you mean: the known keys nearest an unknown one in a settings file.

A typo in config.toml (or a template, a script) is refused with the key named; the
nearest key the same table knows turns "unknown key" into a fix.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence

from pydantic import BaseModel


def suggestion(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """The suffix " (did you mean `x`?)" for the unknown key at `loc` (a validation error's path
    from `model`), or "" when no known key of its table is near it."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    table = _table(model, loc[:-1])
    if table is None:
        return ""
    known = [f.alias or name for name, f in table.model_fields.items()]
    near = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    return f" (did you mean `{near[0]}`?)" if near else ""


def _table(model: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    """The model of the table at `path` below `model` (list items and dict values
    followed), or None where the path leaves the models."""
    current: object = model
    for part in path:
        if isinstance(part, int):  # an item of a list: its model is the field's
            continue
        found = _model_in(current)
        if found is None:
            return None
        field = found.model_fields.get(part)
        if field is None:
            return None
        current = field.annotation
    return _model_in(current)


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The model an annotation holds (itself, or inside list[...], X | None, dict[str, X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return None
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
