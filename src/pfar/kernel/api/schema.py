"""The operator API's JSON Schema: for every op of the control socket, the request it
takes and the reply it answers with, the records' definitions shared once
(`docs/operator-api.schema.json`, kept current by a test).

    python -m pfar.kernel.api.schema > docs/operator-api.schema.json
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from .requests import COMMANDS


def api_schema(ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
    """{"ops": {op: {"request": schema, "reply": schema}}, "$defs": {...}}; OpenAPI
    keeps the definitions elsewhere (`ref_template`)."""
    inputs: list[tuple[tuple[str, str], JsonSchemaMode, TypeAdapter[Any]]] = []
    for op, command in COMMANDS.items():
        inputs.append(((op, "request"), "validation", TypeAdapter(command.arguments)))
        inputs.append(((op, "reply"), "serialization", TypeAdapter(command.reply.shape)))
    found, shared = TypeAdapter.json_schemas(inputs, ref_template=ref_template)
    ops: dict[str, dict[str, Any]] = {}
    for (op, part), _mode in found:
        ops.setdefault(op, {})[part] = found[(op, part), _mode]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pfar operator API",
        "description": (
            "Each op of the control socket: a request {'op': <op>, ...fields} and the "
            "reply's 'result' (docs/operator-api.md)."
        ),
        "ops": dict(sorted(ops.items())),
        **shared,
    }


if __name__ == "__main__":
    print(json.dumps(api_schema(), indent=2, sort_keys=True))
