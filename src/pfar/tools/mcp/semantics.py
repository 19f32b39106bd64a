"""What a server's tool is to the journal, from the protocol's tool annotations and the
owner's word over them (`[mcp.servers.tools.NAME]`).

| annotations | semantics | after a crash cut a call off |
|---|---|---|
| readOnlyHint | read | run again |
| idempotentHint (not read-only) | idempotent | run again with the same arguments |
| neither | write | the owner is asked (retry / skip / fail) |

A tool that is not read-only is destructive unless it says `destructiveHint: false`
(the protocol's default), and a destructive tool asks the owner before every call.
Annotations are a server's hints, never trusted to widen anything the owner did not
allow: they only choose among the durable rules every tool has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp import types

from ...config.mcp import McpToolConfig
from ...journal.records import Idempotency, Semantics

Kind = Literal["read", "idempotent", "write"]


@dataclass(frozen=True, slots=True)
class ToolRules:
    kind: Kind
    # True: asked before every call (a standing "always" does not cover it); False:
    # runs without a question; None: as any tool (`[loop] always_allow`, standing answers)
    asks: bool | None
    destructive: bool

    @property
    def semantics(self) -> Semantics:
        return Semantics.Read if self.kind == "read" else Semantics.Write

    @property
    def idempotency(self) -> Idempotency:
        # the far side's own word that a repeat has no further effect: pfar's `key`
        # rule (retried with the same arguments), the arguments being the key
        return Idempotency.key if self.kind == "idempotent" else Idempotency.none


def rules_of(annotations: types.ToolAnnotations | None, owner: McpToolConfig | None) -> ToolRules:
    hints = annotations or types.ToolAnnotations()
    read_only = hints.read_only_hint is True
    kind: Kind = "read" if read_only else "idempotent" if hints.idempotent_hint else "write"
    destructive = not read_only and hints.destructive_hint is not False
    if owner is not None and owner.semantics is not None:
        kind = owner.semantics
        destructive = destructive and kind != "read"
    asks: bool | None = True if destructive else None
    if owner is not None and owner.ask is not None:
        asks = owner.ask
    return ToolRules(kind, asks, destructive)
