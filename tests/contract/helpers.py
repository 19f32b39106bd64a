"""What the contract's tests start from: a store's writes they share, and running them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any, TypeVar

from pfar.journal import TaskKind, TaskRecord, TaskState
from pfar.journal import payloads as p
from pfar.journal.locks_sql import LockOwner
from pfar.journal.records import ApprovalRecord
from pfar.journal.store import Store
from pfar.journal.turns import LoopSettings

from . import builders as b

S = TaskState
T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """Await one verb, on the one event loop the contract's stores are opened on (a
    server's connections belong to the loop that made them)."""

    async def go() -> T:
        return await coro

    return RUNNER.run(go())


RUNNER = asyncio.Runner()


def created(store: Store, payload: p.Payload | None = None) -> TaskRecord:
    """A task created in `payload`'s state (Extracting when none is given)."""
    t = b.task(payload=payload) if payload is not None else b.task()
    got, made = run(store.tasks.create(t))
    assert made and got == t
    return t


def parked(store: Store, **kw: Any) -> tuple[TaskRecord, ApprovalRecord]:
    """A task at step 1, parked on an approval (built with `kw`) whose prompt is queued."""
    t = created(store, p.Executing(current_step=1))
    a = b.approval(t.task_id, **kw)
    msg = b.message(f"approval:{a.approval_id}:0", "approval", task_id=t.task_id)
    run(
        store.questions.park_approval(a, msg, p.AwaitingApproval(approval_id=a.approval_id, step=1))
    )
    return t, a


def lock_owner(boot: str = "boot-1", pid: int = 101, host: str = "here") -> LockOwner:
    return LockOwner(boot, host, pid, 5000 + pid)


def release(store: Store, holder: str) -> None:
    """Let `holder`'s locks go (a release rides on the next commit: one is made)."""
    store.locks.release(holder)
    settle(store)


def settle(store: Store) -> None:
    """Make a commit, so that what was deferred (it rides on the next one) is committed."""
    run(store.locks.renew("no-such-boot", 1))


def llm_call(task_id: str, **kw: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "provider": "scripted",
        "model": "m",
        "input_tokens": 1,
        "output_tokens": 1,
        "time_to_first_token": 0.1,
        "total_time": 0.2,
        "cost_usd": 0.0,
        "queued_seconds": 0.0,
        **kw,
    }


def loop_task(payload: p.Payload | None = None, **kw: Any) -> TaskRecord:
    """A loop task's record (not yet created), in `payload`'s state."""
    return replace(b.task(payload=payload or p.Executing(), **kw), kind=TaskKind.loop)


def created_loop(
    store: Store,
    payload: p.Payload | None = None,
    settings: LoopSettings | None = None,
    prompt: str = "do it",
) -> TaskRecord:
    """A loop task created in `payload`'s state (Executing), its prompt its first turn."""
    t = loop_task(payload)
    got, made = run(store.loops.create(t, settings or LoopSettings(working_dir="/w"), prompt))
    assert made and got == t
    return t


__all__ = [
    "created",
    "created_loop",
    "llm_call",
    "lock_owner",
    "loop_task",
    "parked",
    "release",
    "run",
]
