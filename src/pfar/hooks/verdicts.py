"""What handlers decided at one firing of a hook point: a `Verdict`, and the parsing of
one handler's answer into a `Decision`.

A handler answers with a JSON object (a Python handler returns the same as a dict):

    {"decision": "block", "reason": "no pushes on Fridays"}
    {"modify": {"input": {"command": "ls -la"}}}
    {"context": "The staging database is read-only today."}
    {"decision": "allow", "reason": "reads under /srv are fine"}

`decision` is "proceed" (the default), "block" or "allow"; `modify` and `context` may
come with "proceed" or "allow". An empty answer (or `None`) is "proceed". Anything else
is nonsense: refused with what was wrong, and treated as the handler's failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..hook_points import MODIFIABLE, HookPoint, capabilities


class HandlerFailed(Exception):
    """A handler failed, timed out or answered nonsense (the message says which)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One handler's answer."""

    decision: Literal["proceed", "block", "allow"] = "proceed"
    reason: str = ""
    modify: dict[str, Any] = field(default_factory=dict)
    context: str = ""


PROCEED_DECISION = Decision()


def parse_decision(point: HookPoint, raw: object) -> Decision:
    """`raw` (a handler's dict, or None) as a Decision the point allows."""
    if raw is None or raw == {}:
        return PROCEED_DECISION
    if not isinstance(raw, dict):
        raise HandlerFailed(f"answered {_short(raw)}, not a JSON object")
    unknown = sorted(set(raw) - {"decision", "reason", "modify", "context"})
    if unknown:
        raise HandlerFailed(
            f"answered unknown keys {', '.join(unknown)} (known: decision, reason, modify, context)"
        )
    caps = capabilities(point)
    decision = raw.get("decision", "proceed")
    if decision not in ("proceed", "block", "allow"):
        raise HandlerFailed(f"answered decision {_short(decision)} (proceed, block or allow)")
    if decision != "proceed" and decision not in caps:
        raise HandlerFailed(f"answered {decision!r}, which {point} does not allow ({_caps(point)})")
    reason = raw.get("reason", "")
    if not isinstance(reason, str):
        raise HandlerFailed("answered a reason that is not a string")
    modify = raw.get("modify", {})
    if not isinstance(modify, dict):
        raise HandlerFailed("answered modify that is not an object")
    if modify:
        fields = MODIFIABLE.get(point, {})
        if not fields:
            raise HandlerFailed(f"answered modify, which {point} does not allow ({_caps(point)})")
        for key, value in modify.items():
            want = fields.get(key)
            if want is None:
                raise HandlerFailed(
                    f"answered modify.{key}; {point} lets a handler change only {', '.join(fields)}"
                )
            if want is not object and (
                not isinstance(value, want) or (want is int and isinstance(value, bool))
            ):
                raise HandlerFailed(f"answered modify.{key} that is not a {_json_type(want)}")
    context = raw.get("context", "")
    if not isinstance(context, str):
        raise HandlerFailed("answered context that is not a string")
    if context and "inject" not in caps:
        raise HandlerFailed(f"answered context, which {point} does not allow ({_caps(point)})")
    return Decision(decision, reason, dict(modify), context)


def parse_output(point: HookPoint, stdout: bytes) -> Decision:
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return PROCEED_DECISION
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raise HandlerFailed(f"printed {_short(text)}, not JSON") from None
    return parse_decision(point, raw)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Every handler's decisions at one firing, combined in order: the first block ends
    it; modifications apply in turn (each handler sees the previous one's); context adds
    up. `failed` names handlers that failed (logged; at a security point, the block)."""

    blocked: str | None = None
    allowed: bool = False
    changes: dict[str, Any] = field(default_factory=dict)
    context: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    failed_closed: bool = False

    @property
    def changed(self) -> bool:
        """Whether it changes what the task does (what is journaled with the step)."""
        return bool(self.blocked or self.allowed or self.changes or self.context)

    def to_json(self) -> dict[str, Any]:
        return {
            "blocked": self.blocked,
            "allowed": self.allowed,
            "changes": self.changes,
            "context": list(self.context),
            "failed": list(self.failed),
            "failed_closed": self.failed_closed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            blocked=data.get("blocked"),
            allowed=bool(data.get("allowed")),
            changes=dict(data.get("changes") or {}),
            context=tuple(data.get("context") or ()),
            failed=tuple(data.get("failed") or ()),
            failed_closed=bool(data.get("failed_closed")),
        )


PROCEED = Verdict()


def _caps(point: HookPoint) -> str:
    return "it allows " + ", ".join(sorted(capabilities(point)))


def _json_type(t: type) -> str:
    return {str: "string", int: "number", dict: "JSON object", list: "JSON array"}.get(
        t, t.__name__
    )


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text[:80] + ("…" if len(text) > 80 else ""))
