"""The day's and the month's spend caps lifted: a task held by one waits on its question
(no coroutine); every `LOOK_SECONDS` the kernel looks at those questions and answers
"retry" itself, as the kernel, for each whose hold has lifted (the period is over, or
`pfar reload` raised or removed the cap: a reload that changes `[budget]` looks at
once). The answer is journaled like the owner's and moves the task in the same
commit, so a kill at any point leaves the question pending (looked at again at the
next start) or answered (the task resumes), never both.

The owner is told of a held period once: its first question's prompt. When that one
was answered and tasks are still held, the oldest of their questions (parked without
a prompt) is sent, under its own message key, so a second look sends nothing again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Protocol

from ..answers import Actor, Retry
from ..config import Config
from ..errors import AlreadyDecided, ShuttingDown, UnknownApproval
from ..journal import ApprovalRecord
from ..journal.question_kinds import QuestionKind
from ..journal.store import Store
from ..runners.asking import approval_message
from ..runners.spend_gate import asked_cap, hold_lifted
from .answering import Answering
from .owner import OwnerChannel

log = logging.getLogger("pfar.kernel")

LOOK_SECONDS = 30.0
KERNEL = Actor("kernel", "spend cap lifted")


class HoldsHost(Protocol):
    config: Config
    journal: Store
    answering: Answering
    owner: OwnerChannel


async def lift(k: HoldsHost) -> list[str]:
    """Answer "retry" to each pending day or month cap question whose hold has lifted;
    the tasks it let go. Then tell the owner of a period whose tasks are still held
    and of which no question's prompt was sent."""
    budget = k.config.budget
    freed: list[str] = []
    held: defaultdict[tuple[str, str], list[ApprovalRecord]] = defaultdict(list)
    for question in await k.journal.questions.approvals():
        asked = asked_cap(question) if question.action_type is QuestionKind.spend_cap else None
        if asked is None or asked.scope == "task":
            continue
        if not await hold_lifted(k.journal, budget, question):
            held[(asked.scope, asked.period)].append(question)
            continue
        try:
            await k.answering.answer(question.approval_id, Retry(), by=KERNEL)
        except (AlreadyDecided, UnknownApproval):  # the owner answered meanwhile
            continue
        freed.append(question.task_id)
    untold = [
        min(questions, key=lambda q: q.created_at)
        for questions in held.values()
        if not any(q.prompts_sent for q in questions)
    ]
    if untold:
        await k.journal.events.enqueue([approval_message(q, 0) for q in untold])
        k.owner.notify()
    return freed


async def run(k: HoldsHost) -> None:
    while True:
        await asyncio.sleep(LOOK_SECONDS)
        try:
            freed = await lift(k)
        except ShuttingDown:
            return
        if freed:
            log.info("spend cap lifted: %d task(s) go on", len(freed))
