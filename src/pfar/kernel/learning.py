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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PfarError
from ..hooks import HookPoint, Hooks
from ..journal import Journal, TaskState
from ..journal.records import now_rfc3339
from ..journal.turns import AssistantTurn, SummaryTurn, UserTurn
from ..llm.messages import ChatRequest, Message
from ..llm.proxy import InferenceProxy
from ..vault import knowledge

log = logging.getLogger("pfar.knowledge")

Candidates = list[tuple[str, tuple[str, ...]]]


@dataclass
class Learner:
    store: Callable[[], knowledge.KnowledgeStore | None]
    hooks: Hooks
    journal: Journal
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
        """A completed loop task's learnings, kept for later tasks."""
        store = self.store()
        if store is None:
            return
        task = await self.journal.tasks.get(task_id)
        if task.state is not TaskState.Completed:
            return
        turns = await self.journal.loops.turns(task_id)
        texts = [
            t.turn.text
            for t in turns
            if isinstance(t.turn, AssistantTurn | SummaryTurn) and t.turn.text
        ]
        candidates = knowledge.extract(texts)
        if candidates and self.mode == "hybrid":
            prompt = next((t.turn.text for t in turns if isinstance(t.turn, UserTurn)), "")
            candidates = await self._refine(task_id, prompt, candidates)
        kept = []
        try:
            for content, tags in candidates:
                if self.hooks.wants(HookPoint.LearningExtracted):
                    said = await self.hooks.fire(
                        HookPoint.LearningExtracted,
                        {"task_id": task_id, "content": content, "tags": list(tags)},
                    )
                    if said.blocked:
                        continue
                    content = str(said.changes.get("content", content))
                    tags = tuple(str(t) for t in said.changes.get("tags", tags))
                found = store.add(content, task_id, tags, now_rfc3339())
                if found is not None:
                    kept.append(found)
        except Exception as exc:
            log.warning("knowledge store: task %s's learnings not kept: %s", task_id[:8], exc)
        for learning in kept:
            await self.journal.events.publish(
                "LearningExtracted",
                task_id,
                {"learning_id": learning.learning_id, "tags": list(learning.tags)},
            )

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
