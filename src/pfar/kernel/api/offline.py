"""The views a running kernel answers live (`queue`, `channels`, `learnings`, `task
context`, `attach`), read from a home's vault when no kernel runs.

Nothing here writes: the journal is open read-only, `memory.db` too, and `attach`'s
"where the viewer stopped" mark is left as it is (the next attach to a running kernel
goes on from there). What only a running kernel knows (a channel's connection, a rate
limit's headroom, a cron template's next slot) is said to need one.
"""

from __future__ import annotations

import re

from ...config import Config
from ...errors import BadRequest
from ...journal import TaskKind, TaskRecord, TaskState
from ...journal.payloads import Queued
from ...journal.store import Store
from ...runners.loop.context import ContextStats
from ...runners.loop.runner import context_stats_of, offered_tools
from ...tools import ToolRegistry
from ...vault import keys
from ...vault.home import Home
from ...vault.knowledge import KnowledgeStore, Learning
from ..admission import Waiting
from .attach import Shown, mark_key, turns_shown
from .records import ChannelView

NO_KERNEL = "no kernel runs"
_SUBSCRIBER = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def check_subscriber(name: str) -> None:
    if not _SUBSCRIBER.fullmatch(name):
        raise BadRequest("subscriber", f"{name!r}: 1 to 64 letters, digits, '.', '_' or '-'")


def learnings(home: Home, search: str | None, limit: int) -> list[Learning]:
    """`memory.db`'s learnings, read-only; none when the store was never made."""
    if not home.memory_db.exists():
        return []
    store = KnowledgeStore.open(home.memory_db, key=keys.unlock(home), readonly=True)
    try:
        return store.search(search, limit)
    finally:
        store.close()


async def queue(journal: Store) -> list[Waiting]:
    """The tasks journaled Queued, highest priority first, then the longest waiting:
    the order a kernel's admission starts them in."""
    found: list[tuple[int, str, str]] = []
    for t in await journal.tasks.listing([TaskState.Queued.value], 1_000_000):
        if isinstance(t, TaskRecord):
            priority = t.payload.priority if isinstance(t.payload, Queued) else 0
            found.append((priority, t.updated_at, t.task_id))
    found.sort(key=lambda w: (-w[0], w[1]))
    reason = f"{NO_KERNEL}: it starts in its turn when one does (`pfar run`)"
    return [Waiting(tid, p, since, n, reason) for n, (p, since, tid) in enumerate(found, 1)]


async def channels(journal: Store, config: Config) -> list[ChannelView]:
    """Each enabled channel, stopped, with what the vault keeps of it."""
    return [
        ChannelView(
            name,
            "stopped",
            f"{NO_KERNEL} (`pfar run` starts its channels)",
            None,
            0,
            await journal.adapters.get(name),
            await journal.adapters.delivery_counts(name),
        )
        for name in config.channels.enabled()
    ]


async def context(journal: Store, task_id: str, config: Config) -> ContextStats:
    """`/context` as a kernel started on this config would answer it (built-in tools)."""
    task = await journal.tasks.get(task_id)
    if task.kind is not TaskKind.loop:
        raise BadRequest("task", f"{task.task_id} is a {task.kind.value} task, not a loop")
    tools = ToolRegistry.builtin()
    tiers = config.llm.tiers.models()

    def model_for(tier: str) -> str:
        return str(tiers.get(tier) or config.llm.model or "")

    return await context_stats_of(
        journal,
        task.task_id,
        model_for,
        lambda settings: offered_tools(tools, config.loop, settings),
        config.loop,
    )


async def replay(journal: Store, task_id: str, *, from_start: bool) -> list[Shown]:
    """`attach` with no kernel: the turns since the viewer's mark, the state, and the
    end (a task that has not ended goes on when a kernel starts)."""
    task = await journal.tasks.get(task_id)
    if task.kind is not TaskKind.loop:
        raise BadRequest(
            "task_id", f"{task.task_id} is a {task.kind.value} task; only loop tasks stream"
        )
    mark = None if from_start else await journal.adapters.get(mark_key(task_id))
    seq = mark.get("seq") if mark else None
    after = int(seq) if isinstance(seq, int) else -1
    shown, _ = await turns_shown(journal, task_id, after)
    shown.append(Shown("state", task.state.value))
    if task.state.terminal:
        shown.append(Shown("ended", task.state.value))
    else:
        shown.append(Shown("note", f"{NO_KERNEL}: the task goes on when one starts (`pfar run`)"))
    return shown
