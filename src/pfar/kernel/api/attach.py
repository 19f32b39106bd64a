"""`pfar attach`: a loop task's output, live, to a viewer that may come and go.

A viewer is shown, in order: the turns journaled since it last looked (what the task
said and did while nobody watched is kept: it is the journal), then, live, the
model's text as it streams and each turn as it is journaled, and every change of
state. Detaching (closing the stream) stops nothing: the task never waits for a
viewer, and a slow viewer loses streamed text (the turn that follows carries it
whole), never a turn. Where a viewer stopped is kept per task (adapter state
`attach:{task_id}`), so the next attach goes on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from ...journal.store import Store
from ...journal.turns import AssistantTurn
from ...llm.events import ChatEvent, Retrying, TextDelta
from .timeline import said, thought

QUEUE = 1024  # streamed pieces a viewer may fall behind by before pieces are dropped
POLL = 0.25  # seconds between looks at the journal while nothing streams


@dataclass(frozen=True, slots=True)
class Shown:
    """One line for the viewer: a turn (`seq`), streamed text, a note, or the state."""

    kind: Literal["turn", "text", "note", "state", "ended"]
    text: str
    seq: int | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class Viewers:
    """Who watches which task: a bounded queue of streamed events per viewer."""

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[ChatEvent]]] = {}

    def publish(self, task_id: str, event: ChatEvent) -> None:
        for q in self._queues.get(task_id, ()):
            if q.full():  # a slow viewer loses streamed text, never the task's time
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(event)

    @contextlib.contextmanager
    def watching(self, task_id: str) -> Iterator[asyncio.Queue[ChatEvent]]:
        q: asyncio.Queue[ChatEvent] = asyncio.Queue(QUEUE)
        self._queues.setdefault(task_id, set()).add(q)
        try:
            yield q
        finally:
            found = self._queues.get(task_id)
            if found is not None:
                found.discard(q)
                if not found:
                    del self._queues[task_id]


def mark_key(task_id: str) -> str:
    return f"attach:{task_id}"


async def turns_shown(journal: Store, task_id: str, after: int) -> tuple[list[Shown], int]:
    """The turns after `after` as a viewer is shown them, and the last one's seq; the
    viewer's mark is not moved (a look at a home no kernel runs changes nothing)."""
    seen = _Seen(after)
    shown = await seen.read(journal, task_id)
    return shown, seen.seq


async def stream(
    journal: Store, viewers: Viewers, task_id: str, *, from_start: bool = False
) -> AsyncIterator[Shown]:
    """What a viewer of `task_id` is shown, until the task ends (or the viewer leaves)."""
    mark = None if from_start else await journal.adapters.get(mark_key(task_id))
    seq = mark.get("seq") if mark else None
    seen = _Seen(int(seq) if isinstance(seq, int) else -1)
    state = None
    with viewers.watching(task_id) as queue:
        while True:
            # the state is read before the turns: every turn journaled before the task
            # reached that state is then shown ahead of it (the turns are a scan, which
            # may run on a connection of its own and so see a later commit than a read
            # that began before it, never an earlier one)
            task = await journal.tasks.get(task_id)
            for item in await seen.turns(journal, task_id):
                yield item
            if task.state is not state:
                state = task.state
                yield Shown("state", state.value)
            if state.terminal:
                yield Shown("ended", state.value)
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
                            yield Shown("text", text)
                            text = ""
                        seen.streamed = False  # what streamed is void: the turn says it whole
                        yield Shown(
                            "note", f"model call attempt {n} failed ({why}); retrying in {wait:g} s"
                        )
            if text:
                # turns journaled before this answer began come first (a tool's results);
                # an answer journaled whole already, while the viewer slept, says it all
                for item in await seen.turns(journal, task_id):
                    yield item
                if text not in seen.shown_whole:
                    seen.streamed = True
                    yield Shown("text", text)


@dataclass(slots=True)
class _Seen:
    """How far a viewer has been shown the conversation, and whether the model's answer
    being journaled next was already shown as it streamed."""

    seq: int
    streamed: bool = False
    shown_whole: str = ""  # the text of the answer the last look showed whole

    async def turns(self, journal: Store, task_id: str) -> list[Shown]:
        before = self.seq
        out = await self.read(journal, task_id)
        if self.seq != before:
            await journal.adapters.put(mark_key(task_id), {"seq": self.seq})
        return out

    async def read(self, journal: Store, task_id: str) -> list[Shown]:
        new = await journal.loops.turns(task_id, after=self.seq)
        out = []
        self.shown_whole = ""
        for stored in new:
            turn = stored.turn
            if self.streamed and isinstance(turn, AssistantTurn):
                # its text was shown as it streamed: what is left is its calls
                calls = ", ".join(f"{c.name} #{c.step + 1}" for c in turn.calls)
                text = ((f"[calls: {calls}]" if calls else "") + thought(turn)).strip()
                self.streamed = False
            else:
                text = said(turn)
                if isinstance(turn, AssistantTurn):
                    self.shown_whole = turn.text
            if text:
                out.append(Shown("turn", text, stored.seq))
            self.seq = stored.seq
        return out
