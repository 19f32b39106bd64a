"""`Hooks`: fire a point's handlers in order and combine their decisions.

A handler that fails, hangs or answers nonsense never stops the kernel. At an
observe-only point (and any point but the security ones) it is logged and the others
go on; at a security point (SecurityPolicyCheck, PermissionRequest, PreToolUse) it
blocks what it was asked about (fails closed), and the verdict says so for the owner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..hook_points import SECURITY, HookPoint
from .handlers import Handler
from .verdicts import PROCEED, HandlerFailed, Verdict

log = logging.getLogger("pfar.hooks")


class Hooks:
    def __init__(self, handlers: Sequence[Handler] = ()) -> None:
        self.replace(handlers)

    def replace(self, handlers: Sequence[Handler]) -> None:
        """Listen with `handlers` from now on (`pfar reload`): in place, since the
        runners, the lock manager and the lifecycle feed hold this object. A fire
        already under way goes on with the handlers it started with."""
        by_point: dict[HookPoint, tuple[Handler, ...]] = {}
        for h in handlers:
            by_point[h.point] = (*by_point.get(h.point, ()), h)
        self.handlers = tuple(handlers)
        self._by_point = by_point

    def wants(self, point: HookPoint, tool: str | None = None) -> bool:
        """Whether any handler listens at `point` (for `tool`): the hot path's one check."""
        found = self._by_point.get(point)
        if not found:
            return False
        return tool is None or any(not h.tools or tool in h.tools for h in found)

    async def fire(self, point: HookPoint, event: dict[str, Any]) -> Verdict:
        handlers = self._by_point.get(point, ())
        if not handlers:
            return PROCEED
        tool = event.get("tool")
        current = {"hook": str(point), **event}
        changes: dict[str, Any] = {}
        context: list[str] = []
        failed: list[str] = []
        allowed = False
        for h in handlers:
            if h.tools and tool not in h.tools:
                continue
            try:
                d = await h.decide(current)
            except HandlerFailed as exc:
                failure = f"{h.name} {exc}"
                failed.append(failure)
                log.warning("%s hook %s", point, failure)
                if point in SECURITY:
                    return Verdict(
                        blocked=(
                            f"the {point} hook {failure}; pfar blocks what a failed "
                            "security hook was asked about"
                        ),
                        changes=changes,
                        context=tuple(context),
                        failed=tuple(failed),
                        failed_closed=True,
                    )
                continue
            if d.modify:
                changes.update(d.modify)
                current.update(d.modify)
            if d.context:
                context.append(d.context)
            if d.decision == "block":
                reason = d.reason or "no reason given"
                return Verdict(
                    blocked=f"blocked by the {point} hook {h.name}: {reason}",
                    changes=changes,
                    context=tuple(context),
                    failed=tuple(failed),
                )
            if d.decision == "allow":
                allowed = True
        return Verdict(None, allowed, changes, tuple(context), tuple(failed))

    async def observe(self, point: HookPoint, event: dict[str, Any]) -> None:
        """Fire an observe-only point: what handlers answer changes nothing."""
        if point in self._by_point:
            await self.fire(point, event)


NO_HOOKS = Hooks()
