"""Hooks where a runner decides something: a verdict kept with the task, so a resumed
task replays what the handlers decided instead of asking them again.

`decide` is for points whose decision changes what the task does (the context given
to the model, the request, a tool's arguments, whether a call may run): the first
firing for a key (the point and the step or turn) is journaled with the task before
the task acts on it, and every later look at the same key replays it. A security hook
that failed closed is told to the owner in the same commit. `observe` fires a point
whose answer changes nothing (nothing is kept; after a crash it may fire again).
"""

from __future__ import annotations

from typing import Any

from ..hooks import PROCEED, HookPoint, Verdict
from ..journal import OwnerMessage
from ..journal.message_keys import HookKey, MessageKind
from .services import Services


async def decide(
    svc: Services, task_id: str, title: str, point: HookPoint, key: str, event: dict[str, Any]
) -> Verdict:
    """The verdict at `point` about `key` of the task: replayed, or fired and kept."""
    if not svc.hooks.wants(point, event.get("tool")):
        return PROCEED
    full = f"{point}:{key}"
    known = await svc.journal.tasks.hook_verdict(task_id, full)
    if known is not None:
        return Verdict.from_json(known)
    verdict = await svc.hooks.fire(point, {"task_id": task_id, **event})
    messages = []
    if verdict.failed_closed:
        messages.append(
            OwnerMessage(
                message_key=HookKey(task_id, full),
                kind=MessageKind.notice,
                task_id=task_id,
                body=f"Task {title} ({task_id[:8]}): {verdict.blocked}. Fix or remove the "
                "hook (docs/hooks.md).",
            )
        )
    kept = await svc.journal.tasks.record_hook_verdict(task_id, full, verdict.to_json(), messages)
    if messages:
        svc.notify_owner()
    return Verdict.from_json(kept)


async def observe(svc: Services, point: HookPoint, event: dict[str, Any]) -> None:
    if svc.hooks.wants(point, event.get("tool")):
        await svc.hooks.observe(point, event)
