"""The hook handlers a kernel listens with, as the owner is shown them (`pfar hooks`,
the console's Kernel page): at which point, what runs, for which tools, and whether a
failure there blocks (a security point fails closed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ...hooks import SECURITY, Hooks
from ...hooks.handlers import PythonHandler

HandlerKind = Literal["python", "command"]


@dataclass(frozen=True, slots=True)
class HookView:
    point: str
    kind: HandlerKind
    name: str  # module:function, or the command (its label, or its start)
    tools: tuple[str, ...]  # empty: every tool (or a point without tools)
    timeout_seconds: float
    fails_closed: bool  # a security point: a handler that fails blocks what it was asked

    def describe(self) -> str:
        tools = f" for {', '.join(self.tools)}" if self.tools else ""
        closed = ", fails closed" if self.fails_closed else ""
        return f"{self.point}: {self.kind} {self.name}{tools} ({self.timeout_seconds:g} s{closed})"


def hook_views(hooks: Hooks, redact: Callable[[str], str]) -> list[HookView]:
    """Every handler in the order it fires; a command is shown with the vault's secrets
    masked (an owner may have written a token into one)."""
    return [
        HookView(
            point=str(h.point),
            kind="python" if isinstance(h, PythonHandler) else "command",
            name=redact(h.name),
            tools=tuple(sorted(h.tools)),
            timeout_seconds=h.timeout,
            fails_closed=h.point in SECURITY,
        )
        for h in hooks.handlers
    ]
