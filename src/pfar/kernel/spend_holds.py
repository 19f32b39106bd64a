"""The day's and the month's spend caps lifted: a task held by one waits on its question
(no coroutine); every `LOOK_SECONDS` the kernel looks at those questions and answers
"retry" itself, as the kernel, for each whose hold has lifted (the period is over, or
`pfar reload` raised or removed the cap). The answer is journaled like the owner's and
moves the task in the same commit, so a kill at any point leaves the question pending
(looked at again at the next start) or answered (the task resumes), never both.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ..answers import Actor, Retry
from ..config import Config
from ..errors import AlreadyDecided, ShuttingDown, UnknownApproval
from ..journal.question_kinds import QuestionKind
from ..journal.store import Store
from ..runners.spend_gate import hold_lifted
from .answering import Answering

log = logging.getLogger("pfar.kernel")

LOOK_SECONDS = 30.0
KERNEL = Actor("kernel", "spend cap lifted")


class HoldsHost(Protocol):
    config: Config
    journal: Store
    answering: Answering


async def lift(k: HoldsHost) -> list[str]:
    """Answer "retry" to each pending day or month cap question whose hold has lifted;
    the tasks it let go."""
    budget = k.config.budget
    freed = []
    for question in await k.journal.questions.approvals():
        if question.action_type is not QuestionKind.spend_cap:
            continue
        if not await hold_lifted(k.journal, budget, question):
            continue
        try:
            await k.answering.answer(question.approval_id, Retry(), by=KERNEL)
        except (AlreadyDecided, UnknownApproval):  # the owner answered meanwhile
            continue
        freed.append(question.task_id)
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
