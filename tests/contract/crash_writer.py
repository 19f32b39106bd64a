"""A child for the contract's SIGKILL test: open a store, commit writes, acknowledge each.

    python -m tests.contract.crash_writer MODULE:OPENER PATH

`OPENER(PATH)` opens the store. The child writes until it is killed, in rounds of
concurrent writes (so that they share commits), and prints one line per write once
its commit returned: `created TASK_ID` or `planned TASK_ID N`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from pfar.journal import Journal, TaskUpdate
from pfar.journal.payloads import Planning

from . import builders as b


def _ack(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _one(store: Journal, n: int) -> None:
    t = b.task(event_id=f"crash-{n}")
    await store.tasks.create(t, b.event(f"crash-{n}"))
    _ack(f"created {t.task_id}")
    await store.tasks.transition(
        t.task_id, Planning(), point=None, update=TaskUpdate(extracted_metadata={"n": n})
    )
    _ack(f"planned {t.task_id} {n}")


async def _write_forever(store: Journal) -> None:
    n = 0
    while True:
        await asyncio.gather(*(_one(store, n + i) for i in range(8)))
        n += 8


def main(argv: list[str]) -> None:
    module, _, name = argv[0].partition(":")
    opener: Callable[[Path], Journal | Awaitable[Journal]] = getattr(
        importlib.import_module(module), name
    )

    async def go() -> None:
        opened = opener(Path(argv[1]))
        store = await opened if inspect.isawaitable(opened) else opened
        await _write_forever(store)

    asyncio.run(go())


if __name__ == "__main__":
    main(sys.argv[1:])
