"""What a tool is: its Read/Write semantics, how it is idempotent, and how it runs."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics

_SECRET_REF = re.compile(r"\{\{\s*secret:([A-Za-z0-9_.\-]+)\s*\}\}")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool call may use. `idempotency_key` is stable across retries of one step."""

    task_id: str
    step: int
    idempotency_key: str
    workspace: Path
    secret: Callable[[str], str | None]
    # journals a process the tool started (see tools/processes.py), before it is waited on
    started_process: Callable[[int], Awaitable[None]] | None = None

    def resolve(self, value: Any) -> Any:
        """Replace `{{secret:NAME}}` references with values, at call time only.

        The journal keeps the reference, never the value.
        """
        if isinstance(value, str):

            def sub(m: re.Match[str]) -> str:
                found = self.secret(m.group(1))
                if found is None:
                    raise ToolFailed(
                        f"secret {m.group(1)!r} is not in the vault; "
                        f"set it with `pfar credential` when asked, or `pfar secret set`"
                    )
                return found

            return _SECRET_REF.sub(sub, value)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    # label of the data the tool returns: "Raw" is untrusted outside data (taints later writes)
    result_label: ClassVar[str]

    def semantics(self, args: dict[str, Any]) -> Semantics: ...

    def idempotency(self, args: dict[str, Any]) -> Idempotency: ...

    def validate(self, args: dict[str, Any]) -> None:
        """Raise ToolFailed naming the bad argument."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any: ...

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        """For `Idempotency.check` tools: the result if the effect already exists, else None."""


def require(args: dict[str, Any], name: str, kind: type, tool: str) -> Any:
    if name not in args:
        raise ToolFailed(f"{tool}: missing argument {name!r}")
    value = args[name]
    if not isinstance(value, kind):
        raise ToolFailed(f"{tool}: argument {name!r} must be a {kind.__name__}")
    return value


def inside(workspace: Path, relative: str, tool: str) -> Path:
    """A path inside the task's workspace; anything escaping it is refused."""
    target = (workspace / relative).resolve()
    root = workspace.resolve()
    if target != root and root not in target.parents:
        raise ToolFailed(f"{tool}: path {relative!r} is outside the task workspace")
    return target
