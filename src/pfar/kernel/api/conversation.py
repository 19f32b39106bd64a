"""A loop task's conversation for a view that only looks: any number of them, none
moving anything.

`conversation` reads the turns after a number; `follow` gives them, then, while the
task runs, the model's text as it streams (the kernel's in-memory `Viewers`, the
stream `pfar attach` follows), each turn as it is journaled and every change of state,
until the task ends or the view leaves. Unlike `pfar attach`, neither keeps where the
viewer stopped (attach's mark `attach:{task_id}` is never read or written): a view
remembers the last `seq` it was given and follows again from it.

What streams is a courtesy: a view that falls behind or starts mid-answer loses
streamed text, never a turn (the answer's turn says it whole).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ...errors import BadRequest, NotALoopTask
from ...journal import TaskKind
from ...journal.store import Store
from ...llm.events import Retrying, TextDelta
from .attach import POLL, Viewers
from .conversation_records import (
    Conversation,
    ConversationTurn,
    ModelSaid,
    RetryNote,
    StateChange,
    Streamed,
    turn_view,
)

Followed = ConversationTurn | Streamed | RetryNote | StateChange


def check_after(after: int) -> None:
    if after < -1:
        raise BadRequest("after", f"must be -1 (from the first turn) or more, not {after}")


async def conversation(journal: Store, task_id: str, after: int = -1) -> Conversation:
    """The turns of `task_id` (a whole id) after `after`, and its state; reads only."""
    check_after(after)
    task = await journal.tasks.get(task_id)
    if task.kind is not TaskKind.loop:
        raise NotALoopTask(task_id, task.kind.value)
    # the state is read before the turns: every turn journaled before the task reached
    # it is among them
    turns = tuple(turn_view(t) for t in await journal.loops.turns(task_id, after=after))
    return Conversation(task_id, task.state, after, turns[-1].seq if turns else after, turns)


async def follow(
    journal: Store, viewers: Viewers, task_id: str, after: int = -1
) -> AsyncIterator[Followed]:
    """The turns after `after`, the state, then what streams, each new turn and state,
    until the task ends. Call `conversation` first to have a bad id or kind refused."""
    seen = _Seen(after)
    state = None
    with viewers.watching(task_id) as queue:
        while True:
            now = await conversation(journal, task_id, seen.seq)
            for turn in seen.taken(now):
                yield turn
            if now.state is not state:
                state = now.state
                yield StateChange(state)
            if state.terminal:
                return
            try:
                async with asyncio.timeout(POLL):  # not wait_for: it may swallow a cancel
                    events = [await queue.get()]
            except TimeoutError:
                continue
            while not queue.empty():
                events.append(queue.get_nowait())
            text = ""
            for event in events:
                match event:
                    case TextDelta(text=piece):
                        text += piece
                    case Retrying(attempt=n, reason=why, wait=wait):
                        if text:
                            yield Streamed(text)
                            text = ""
                        yield RetryNote(
                            f"model call attempt {n} failed ({why}); retrying in {wait:g} s"
                        )
            if not text:
                continue
            # turns journaled before this answer began come first (a tool's results)
            for turn in seen.taken(await conversation(journal, task_id, seen.seq)):
                yield turn
            if not seen.already_whole(text):
                yield Streamed(text)


@dataclass(slots=True)
class _Seen:
    """The last turn a view was given, and the text of the answer it was given last
    while no turn came after it (streamed pieces of that answer still queued are not
    shown again)."""

    seq: int
    whole: str = ""

    def taken(self, now: Conversation) -> tuple[ConversationTurn, ...]:
        for turn in now.turns:
            self.whole = turn.text if isinstance(turn, ModelSaid) else ""
        self.seq = now.last_seq
        return now.turns

    def already_whole(self, text: str) -> bool:
        return bool(self.whole) and self.whole.endswith(text)
