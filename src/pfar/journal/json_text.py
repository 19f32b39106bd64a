"""The journal's JSON: every column written as compact, sorted, standard JSON text."""

from __future__ import annotations

import json
import math
from typing import Any, TypeAlias

import orjson
from typing_extensions import TypeAliasType

JSON = Any  # a value json.dumps accepts

# what a JSON column reads back as (`loads`): the type of a value the journal keeps
# whole without knowing its keys (a step's result, an adapter's position, a verdict)
# (a TypeAliasType: a recursive alias that pydantic, which gives the operator API's
# records their schema, can resolve)
JsonValue = TypeAliasType(
    "JsonValue", "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
)
JsonObject: TypeAlias = dict[str, JsonValue]

# orjson writes the text json.dumps(sort_keys=True, separators=(",", ":")) does, several
# times faster (a float may read 0.00001 for 1e-05). What it refuses goes to json, which
# writes it (non-string keys, an int past 64 bits) or refuses it as before (a dataclass,
# a datetime). NaN and the infinities, which JSON lacks, it writes as null, as
# JavaScript's JSON.stringify does: the journal holds standard JSON, which SQLite's JSON
# functions (a task's event is queried with json_extract) and PostgreSQL's jsonb read;
# json would write NaN, which both refuse. Reading stays with json: orjson reads an
# integer past 64 bits as a float, silently.
ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)


def dumps(value: JSON) -> str:
    """Compact JSON with sorted keys (every journal column is written through here)."""
    try:
        return orjson.dumps(value, option=ORJSON_OPTIONS).decode()
    except TypeError:  # an int past 64 bits, a lone surrogate: what json writes, or refuses
        return json.dumps(_finite(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _finite(value: JSON) -> JSON:
    """`value` with NaN and the infinities as None, as orjson writes them (json would
    write NaN, which is not JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def loads(text: str | None) -> JSON:
    # json, not orjson: orjson reads an integer past 64 bits as a float, silently, and a
    # guard that looks for such a run of digits costs more than orjson saves
    return None if text is None else json.loads(text)
