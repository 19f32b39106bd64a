"""The knowledge store in a task's life (seed 001, 2.3 and 6.3): the learnings a new
loop task is given, and the learnings a completed one leaves.

A new task is given the top learnings for its prompt, as the KnowledgeQuery hook words
the query and the KnowledgeInjected hook filters, reorders or adds to them (fixed with
the task: a resumed task sees the same). A completed task's answers give candidates
(keyword mode: its marked sentences); in hybrid mode the cheap tier keeps and rewords
the real ones (its failure keeps the candidates as said). Each passes the
LearningExtracted hook (which may enrich, retag or drop it) before it is kept, and
each kept one is a `LearningExtracted` event. The store is a help, never a
dependency: nothing here fails a task.

Extraction is a journaled job after the task's Completed commit: what was decided is
journaled before any learning is stored (each under an id fixed by the task and its
place, so storing again stores nothing twice), and the mark that they are kept is
journaled with their events. The TaskCompleted event is the job's start: at each
start the kernel looks at the completions since the previous start and finishes any
that a dying kernel left, so a learning is kept once even across a SIGKILL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PfarError
from ..hooks import HookPoint, Hooks
from ..journal import TaskState
from ..journal.bus_sql import BusEventKind
from ..journal.hooks_sql import LEARNINGS_DECIDED, LEARNINGS_KEPT, decided_learnings
from ..journal.records import TaskKind, now_rfc3339
from ..journal.rows import DecidedLearning
from ..journal.store import Store
from ..journal.turns import AssistantTurn, SummaryTurn, UserTurn
from ..llm.messages import ChatRequest, Message
from ..llm.proxy import InferenceProxy
from ..vault import knowledge

log = logging.getLogger("pfar.knowledge")

Candidates = list[tuple[str, tuple[str, ...]]]

SUBSCRIBER = "learnings"  # its bus offset: completions before it were looked at
PAGE = 500


@dataclass
class Learner:
    store: Callable[[], knowledge.KnowledgeStore | None]
    hooks: Hooks
    journal: Store
    model: InferenceProxy
    mode: str = "keyword"  # or "hybrid"
    seconds: float = 120.0

    async def learnings_for(self, prompt: str) -> tuple[str, ...]:
        """The top learnings for a new task's prompt, as its system prompt shows them."""
        store = self.store()
        if store is None:
            return ()
        query = prompt
        if self.hooks.wants(HookPoint.KnowledgeQuery):
            asked = await self.hooks.fire(HookPoint.KnowledgeQuery, {"query": prompt})
            query = str(asked.changes.get("query", prompt))
        try:
            found = [x.line() for x in store.relevant(query)]
        except Exception as exc:
            log.warning("knowledge store: no learnings for a new task: %s", exc)
            return ()
        if self.hooks.wants(HookPoint.KnowledgeInjected):
            shown = await self.hooks.fire(
                HookPoint.KnowledgeInjected, {"query": query, "learnings": found}
            )
            given = shown.changes.get("learnings", found)
            found = [str(x) for x in given][: knowledge.TOP * 2]
        return tuple(found)

    async def learn(self, task_id: str) -> None:
        """A completed loop task's learnings, kept for later tasks, once: what was decided
        is journaled before any is stored, and the mark that they are stored is journaled
        with their LearningExtracted events. A kernel that dies in between does the rest
        at its next start (`catch_up`)."""
        store = self.store()
        if store is None:
            return
        task = await self.journal.tasks.get(task_id)
        if task.kind is not TaskKind.loop or task.state is not TaskState.Completed:
            return
        if await self.journal.tasks.hook_verdict(task_id, LEARNINGS_KEPT) is not None:
            return  # kept before (a restart's second look)
        decided = await self.journal.tasks.hook_verdict(task_id, LEARNINGS_DECIDED)
        learnings: list[DecidedLearning] | None = None
        if decided is None:
            found = await self._decide(task_id)
            if found is None:
                return  # no candidates: nothing to keep, and nothing to journal
            learnings = await self.journal.tasks.learnings_decided(task_id, found)
        kept = []
        try:
            if learnings is None:  # decided before (a restart): as journaled
                learnings = decided_learnings(decided or {})
            for n, item in enumerate(learnings):
                content, tags = item["content"], tuple(item["tags"])
                at = now_rfc3339()
                learning = store.add(
                    content, task_id, tags, at, knowledge.learning_id_for(task_id, n)
                )
                if learning is not None:
                    kept.append({"learning_id": learning.learning_id, "tags": list(learning.tags)})
        except Exception as exc:  # not marked: the next start tries again
            log.warning("knowledge store: task %s's learnings not kept: %s", task_id[:8], exc)
            return
        await self.journal.tasks.learnings_kept(task_id, kept)

    async def _decide(self, task_id: str) -> list[DecidedLearning] | None:
        """The task's learnings as they are to be kept (after the cheap tier in hybrid
        mode and the LearningExtracted hook); None when its answers hold no candidate."""
        turns = await self.journal.loops.turns(task_id)
        texts = [
            t.turn.text
            for t in turns
            if isinstance(t.turn, AssistantTurn | SummaryTurn) and t.turn.text
        ]
        candidates = knowledge.extract(texts)
        if not candidates:
            return None
        if self.mode == "hybrid":
            prompt = next((t.turn.text for t in turns if isinstance(t.turn, UserTurn)), "")
            candidates = await self._refine(task_id, prompt, candidates)
        decided: list[DecidedLearning] = []
        for content, tags in candidates:
            if self.hooks.wants(HookPoint.LearningExtracted):
                try:
                    said = await self.hooks.fire(
                        HookPoint.LearningExtracted,
                        {"task_id": task_id, "content": content, "tags": list(tags)},
                    )
                except Exception as exc:  # a help, never a dependency: kept as said
                    log.warning("task %s: LearningExtracted: %s", task_id[:8], exc)
                else:
                    if said.blocked:
                        continue
                    content = str(said.changes.get("content", content))
                    tags = tuple(str(t) for t in said.changes.get("tags", tags))
            decided.append({"content": content, "tags": list(tags)})
        return decided

    async def catch_up(self) -> None:
        """At start: the loop tasks completed since the previous start whose learnings
        are not marked kept (the kernel died while deciding or storing them) are learned
        now; then the mark moves to here. A home new to this starts at the bus's end."""
        if self.store() is None:
            return  # no store this time: the next start with one looks
        after = await self.journal.events.bus_offset(SUBSCRIBER)
        upto = await self.journal.events.bus_last()
        while after is not None and after < upto:
            events = [e for e in await self.journal.events.bus(after, PAGE) if e.seq <= upto]
            if not events:
                break
            for event in events:
                if event.kind is BusEventKind.TaskCompleted and event.task_id is not None:
                    await self.learn(event.task_id)
            after = events[-1].seq
        await self.journal.events.bus_ack(SUBSCRIBER, upto, point=None)

    async def run(self) -> None:
        """The kernel's duty: catch up once, then nothing for the kernel's life."""
        await self.catch_up()
        await asyncio.Event().wait()

    async def _refine(self, task_id: str, prompt: str, candidates: Candidates) -> Candidates:
        """Hybrid mode: the cheap tier keeps and rewords the real learnings."""
        sentences = [c for c, _ in candidates]
        request = ChatRequest(
            model=self.model.model_for("cheap"),
            system=knowledge.REFINE_SYSTEM,
            messages=(Message("user", knowledge.refine_request(prompt, sentences)),),
            max_tokens=min(self.model.max_tokens, 1024),
            attempt_timeout=self.seconds,
            context={"phase": "learnings"},
        )
        try:
            response = await self.model.chat(request, task_id=task_id)
            return knowledge.refined(response.text, sentences)
        except (PfarError, ValueError) as exc:
            log.warning(
                "task %s: learnings kept as said (the cheap tier's refinement failed: %s)",
                task_id[:8],
                exc,
            )
            return candidates
