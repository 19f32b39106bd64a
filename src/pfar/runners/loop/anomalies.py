"""Layer 3 of the loop's security (seed 001, 4.1): calls that are allowed but unusual.

Two checks, before a call runs (after layers 1 and 2 let it): a task starting more
writes in a minute than `[loop.anomaly] max_writes_per_minute`, and a host that no
tool call of any task has reached before. What is found is a warning to the owner
(and a log line); the task goes on, unless `action = "ask"`, when the call also waits
for the owner's yes. Found and recorded with the host in one commit, and looked up
first: a call looked at again after a crash is judged as it was the first time, and
its warning is not sent twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from ...addresses import normal_host
from ...journal import OwnerMessage, Semantics, TaskRecord
from ...journal.message_keys import AnomalyKey, MessageKind
from ...journal.records import rfc3339
from ...journal.turns import LoopCall, LoopSettings
from ..services import Services

log = logging.getLogger("pfar.loop")


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str  # "write_rate" | "new_host"
    detail: str


def host_of(args: dict[str, Any]) -> str | None:
    url = args.get("url")
    if not isinstance(url, str):
        return None
    return normal_host(urlsplit(url).hostname or "") or None


async def check(
    task: TaskRecord,
    settings: LoopSettings,
    call: LoopCall,
    semantics: Semantics,
    svc: Services,
) -> tuple[Anomaly, ...]:
    """The call's anomalies (warned about once, when first found)."""
    limits = svc.loop.anomaly
    known = await svc.journal.loops.anomalies(task.task_id, call.step)
    if known:
        return tuple(Anomaly(kind, detail) for kind, detail in known)
    found: list[Anomaly] = []
    if limits.max_writes_per_minute and semantics is Semantics.Write:
        since = rfc3339(datetime.now(UTC) - timedelta(minutes=1))
        writes = await svc.journal.loops.writes_since(task.task_id, since)
        if writes >= limits.max_writes_per_minute:
            found.append(
                Anomaly(
                    "write_rate",
                    f"{writes} writes started in the last minute (limit "
                    f"{limits.max_writes_per_minute}, [loop.anomaly] max_writes_per_minute)",
                )
            )
    host = host_of(call.input)
    first = await svc.journal.loops.host_first_seen(host) if host else None
    if host and limits.new_hosts and first in (None, (task.task_id, call.step)):
        found.append(Anomaly("new_host", f"{host} is a host no task has reached before"))
    if found or (host and first is None):
        messages = [_warning(task, settings, call, found, svc)] if found else []
        pairs = [(a.kind, a.detail) for a in found]
        await svc.journal.loops.record_anomalies(task.task_id, call.step, pairs, host, messages)
        if messages:
            svc.notify_owner()
    return tuple(found)


async def check_hop(
    task: TaskRecord, settings: LoopSettings, call: LoopCall, url: str, svc: Services
) -> Anomaly | None:
    """A redirect of the call's to `url` reaching a host no task has reached before:
    the anomaly (warned about once, naming that host), or None. With `action = "ask"`
    it is only found, not recorded: the redirect is not followed, so the host is not
    reached."""
    host = host_of({"url": url})
    if host is None:
        return None
    first = await svc.journal.loops.host_first_seen(host)
    if first not in (None, (task.task_id, call.step)):
        return None
    found = None
    if svc.loop.anomaly.new_hosts:
        found = Anomaly(
            "new_host", f"{host} (a redirect to {url}) is a host no task has reached before"
        )
        if svc.loop.anomaly.action == "ask":
            return found
    messages = [_warning(task, settings, call, [found], svc, key=host)] if found else []
    await svc.journal.loops.record_anomalies(task.task_id, call.step, [], host, messages)
    if messages:
        svc.notify_owner()
    return found


def _warning(
    task: TaskRecord,
    settings: LoopSettings,
    call: LoopCall,
    found: list[Anomaly],
    svc: Services,
    key: str = "",
) -> OwnerMessage:
    title = settings.title or task.task_id[:8]
    what = "; ".join(a.detail for a in found)
    then = (
        "It waits for your answer before it runs."
        if svc.loop.anomaly.action == "ask"
        else 'It goes on (set [loop.anomaly] action = "ask" to be asked first).'
    )
    log.warning(
        "task %s: tool call %d (%s) is unusual: %s", task.task_id, call.step + 1, call.name, what
    )
    return OwnerMessage(
        message_key=AnomalyKey(task.task_id, call.step, key),
        kind=MessageKind.notice,
        task_id=task.task_id,
        body=(
            f"Task {title} ({task.task_id[:8]}), tool call {call.step + 1} ({call.name}), "
            f"is unusual: {what}. {then}"
        ),
    )
