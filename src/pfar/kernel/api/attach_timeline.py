"""`pfar attach` on a pipeline or workflow task: its timeline as it grows.

Such a task has no conversation to stream; what it does is its timeline (steps
started and ended, questions and answers, messages to the owner), told from the
journal as `pfar task show` tells it. A viewer is shown the timeline so far, then
each new line as it is journaled and every change of state, until the task ends.
Leaving stops nothing: the journal is only read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ...journal.store import Store
from .attach import POLL, Shown
from .timeline import task_timeline
from .timeline_entries import Now


async def timeline_stream(journal: Store, task_id: str) -> AsyncIterator[Shown]:
    """The timeline of `task_id` (a whole id), then its new lines, until it ends."""
    shown: set[tuple[str, str]] = set()
    state = None
    while True:
        timeline = await task_timeline(journal, task_id)
        task = await journal.tasks.get(task_id)
        for entry in timeline.entries:
            # "now <state>" is the state line below, not a line of its own
            if isinstance(entry, Now) or (entry.at, entry.words) in shown:
                continue
            shown.add((entry.at, entry.words))
            yield Shown("turn", f"{entry.at[11:19]}  {entry.words}")
        if task.state is not state:
            state = task.state
            yield Shown("state", state.value)
        if state.terminal:
            if task.error:
                yield Shown("note", task.error)
            yield Shown("ended", state.value)
            return
        await asyncio.sleep(POLL)
