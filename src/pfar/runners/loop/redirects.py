"""A redirect to a new host, judged as a call of its own would be (layers 1 to 3).

A tool that follows redirects (WebFetch) asks this before each hop to a host the
call has not reached yet. The owner allowed (or the policy let through) the host
the call names; the host a page redirects to is another matter: it must pass the
policy (layer 1: its name; the tool judges its addresses), be covered by the
tool's "always" or a standing "always allow" answer for that host (layer 2: a
question cannot be asked in the middle of a fetch, so the model is told to fetch
that URL itself, which asks), and a host no task has reached before is warned
about like any other (layer 3), or, with `action = "ask"`, not followed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from ...errors import ToolFailed
from ...journal import TaskRecord
from ...journal.turns import LoopCall, LoopSettings
from ..services import Services
from . import anomalies
from .permissions import Policy, subject


def judge(
    task: TaskRecord,
    settings: LoopSettings,
    call: LoopCall,
    policy: Policy,
    workdir: Path,
    svc: Services,
) -> Callable[[str], Awaitable[None]]:
    """The check of one call's redirects: raises ToolFailed saying why a hop to `url`
    is not followed."""

    async def redirected(url: str) -> None:
        args = {**call.input, "url": url}
        host = subject(call.name, args)
        why = f"{call.name}: the page redirects to {url}"
        refusal = policy.refusal(call.name, args, workdir)
        if refusal is not None:
            raise ToolFailed(f"{why}, which is refused. {refusal}")
        standing = policy.standing(await svc.journal.loops.rules(), call.name, args)
        if standing == "deny":
            raise ToolFailed(
                f'{why}; the owner never allows {call.name} on {host} (a standing "never '
                'allow" answer): it was not followed'
            )
        if call.name not in policy.always_allow and standing != "allow":
            raise ToolFailed(
                f"{why}; {host} is not a host the owner allowed for this call, so the "
                f"redirect was not followed. Fetch {url} itself if you need it (the owner "
                "is asked)"
            )
        unusual = await anomalies.check_hop(task, settings, call, url, svc)
        if unusual is not None and svc.loop.anomaly.action == "ask":
            raise ToolFailed(
                f"{why}; it is unusual ({unusual.detail}), so it was not followed. Fetch "
                f"{url} itself if you need it (the owner is asked)"
            )

    return redirected
