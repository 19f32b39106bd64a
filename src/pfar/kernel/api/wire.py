"""The operator API's records on the wire: one schema per record, used both ways.

A verb's reply is serialised by the kernel and parsed back by a client through the
same pydantic adapter over the record's type, so what the CLI (or the console, or a
script) holds after a call is the record the verb returned, not a dict to index into:
`parse(dump(x)) == x` for every record (a property test checks it). The same adapters
give the JSON Schema published beside docs/operator-api.md (schema.py).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Generic, TypeVar, get_origin

from pydantic import TypeAdapter, ValidationError

from ...errors import BadReply

R = TypeVar("R")


class Wire(Generic[R]):
    """A record type's one schema: `dump` to JSON values, `parse` back, `schema`."""

    def __init__(self, shape: type[R]) -> None:
        self.shape = shape
        # what a refusal calls it: "TaskTimeline"; a list by its whole type
        self.name = str(shape) if get_origin(shape) else getattr(shape, "__name__", str(shape))

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[R]:
        return TypeAdapter(self.shape)

    def dump(self, value: R) -> Any:
        """The record as JSON values (enums as their values, tuples as lists)."""
        return self._adapter.dump_python(value, mode="json", by_alias=True)

    def parse(self, data: object, op: str) -> R:
        """The record again from what `dump` gave, read as JSON in strict mode: a value
        of the wrong type is refused, never converted (`"1"` is not 1).

        Raises:
            BadReply: naming the field that does not fit.
        """
        try:
            return self._adapter.validate_json(json.dumps(data), strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(the whole reply)"
            raise BadReply(op, self.name, where, first["msg"]) from None

    def schema(self) -> dict[str, Any]:
        return self._adapter.json_schema(mode="serialization")


@functools.cache
def _wire_of(shape: Any) -> Wire[Any]:
    return Wire(shape)


def wire_json(value: object) -> Any:
    """A record (or a list of them) as JSON values, in its type's one schema: what the
    control socket sends and `--json` prints."""
    if isinstance(value, list | tuple):
        return [wire_json(v) for v in value]
    shape: Any = type(value)
    return _wire_of(shape).dump(value)
