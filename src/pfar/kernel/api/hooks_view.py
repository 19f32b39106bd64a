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


def _shown(text: str, most: int = 60) -> str:
    """Shortened after it was redacted: a cut through a secret would leave a piece of it
    that no longer matches the secret, and so is not masked."""
    return text if len(text) <= most else text[: most - 1] + "…"


def hook_views(hooks: Hooks, redact: Callable[[str], str]) -> list[HookView]:
    """Every handler in the order it fires; a command is shown with the vault's secrets
    masked (an owner may have written a token into one), whole, then shortened."""
    return [
        HookView(
            point=str(h.point),
            kind="python" if isinstance(h, PythonHandler) else "command",
            name=_shown(redact(h.target if isinstance(h, PythonHandler) else h.label or h.command)),
            tools=tuple(sorted(h.tools)),
            timeout_seconds=h.timeout,
            fails_closed=h.point in SECURITY,
        )
        for h in hooks.handlers
    ]
