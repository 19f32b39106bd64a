"""Answering: what the owner says to a task that waits on them. An answer to its
question (an approval, a credential prompt), or a message to a loop task waiting for
one (`/retry` of the model's answer it holds: kernel/retrying.py): each is journaled
first, then the task is advanced from the journal. And `/context`: how full a loop
task's context is.
"""

from __future__ import annotations

from typing import Protocol

from ..answers import (
    IN_PROCESS,
    Abandon,
    Actor,
    Answer,
    Approve,
    Deny,
    Fail,
    answer_of,
    parse_answer,
)
from ..errors import AlreadyDecided, AnswerDoesNotFit, BadRequest, ShuttingDown, TaskStateRefused
from ..hooks import HookPoint, Hooks
from ..journal import ApprovalRecord, Move, TaskKind, TaskRecord
from ..journal.journal import prompt_status_text
from ..journal.payloads import AwaitingApproval
from ..journal.question_kinds import QuestionKind
from ..journal.store import Store
from ..policy.redact import Redactor
from ..recovery.in_flight import in_flight_answer
from ..runners import Services
from ..runners.loop import runner as loop_runner
from ..runners.loop.context import ContextStats
from ..runners.registry import runner_for
from ..vault.secrets import SecretStore, checked_secret
from .audit import AuditLog
from .intake import check_event_id
from .owner import OwnerChannel


class AnsweringHost(Protocol):
    """What answering uses of the kernel."""

    journal: Store
    audit: AuditLog
    owner: OwnerChannel
    hooks: Hooks
    redactor: Redactor
    secrets: SecretStore
    services: Services

    @property
    def accepting(self) -> bool: ...

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None: ...


class Answering:
    def __init__(self, host: AnsweringHost) -> None:
        self._k = host

    async def answer(
        self, approval_id: str, answer: Answer | str, by: Actor = IN_PROCESS
    ) -> tuple[ApprovalRecord, bool]:
        """Answer an approval: Approve (its first option), Deny (its way of saying no),
        or one of the options it offers (as a record of pfar.answers, or its name);
        anything else is refused (AnswerDoesNotFit), naming them. Idempotent: the same
        answer again changes nothing. `by` (who, through which surface) is journaled
        with the answer."""
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        if isinstance(answer, str):  # this API is an edge too: parsed here, once
            answer = parse_answer(answer)
        approval_id = await k.journal.questions.resolve_approval_id(approval_id)
        a = await k.journal.questions.approval(approval_id)
        option = _as_option(a, answer)
        if option.kind not in a.options and a.status.value == "pending":
            raise AnswerDoesNotFit(approval_id, answer.kind, a.options)
        decided, changed = await k.journal.questions.decide_approval(
            approval_id, option, resume_to=_answer_outcome, by=str(by)
        )
        if changed:
            k.audit.log(
                "approval_decided",
                approval_id=approval_id,
                decision=option.kind,
                task_id=decided.task_id,
                by=str(by),
            )
            await self._answered_hooks(decided, option.kind)
            k.advance(decided.task_id)
            k.owner.notify()
        return decided, changed

    async def _answered_hooks(self, decided: ApprovalRecord, choice: str) -> None:
        """PostUserInput with the owner's decision; PermissionGranted or PermissionDenied
        when it answered a permission question (seed 001, 4.2)."""
        about = {
            "task_id": decided.task_id,
            "kind": "answer",
            "question": str(decided.action_type),
            "step": decided.step,
            "tool": decided.tool,
            "decision": choice,
        }
        hooks = self._k.hooks
        await hooks.observe(HookPoint.PostUserInput, about)
        if decided.action_type is QuestionKind.permission:
            granted = choice in ("approve", "always")
            point = HookPoint.PermissionGranted if granted else HookPoint.PermissionDenied
            await hooks.observe(point, {**about, "by": "owner"})

    async def provide_credential(
        self, prompt_id: str, secret: str, by: Actor = IN_PROCESS
    ) -> TaskRecord:
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        prompt_id = await k.journal.questions.resolve_prompt_id(prompt_id)
        p = await k.journal.questions.credential_prompt(prompt_id)
        if p.status.value != "pending":
            raise AlreadyDecided("credential prompt", prompt_id, prompt_status_text(p))
        name = p.vault_ref.removeprefix("vault:")
        value = checked_secret(name, secret)
        # secrets.db first: a crash before the journal write re-prompts, never loses it
        k.secrets.set(name, value, p.service)
        k.redactor.refresh()
        await k.journal.questions.receive_credential(prompt_id, str(by))
        k.audit.log(
            "credential_received",
            prompt_id=prompt_id,
            service=p.service,
            task_id=p.task_id,
            by=str(by),
        )
        k.advance(p.task_id)
        return await k.journal.tasks.get(p.task_id)

    async def send(
        self,
        task_id: str,
        text: str,
        *,
        done: bool = False,
        event_id: str | None = None,
        adapter: str = "api",
    ) -> TaskRecord:
        """The owner's message to a loop task waiting for one (`done`: end it instead,
        with its summary). Refused, naming its state, when it is not waiting. With an
        `event_id` (a chat message's), the same message twice is taken once."""
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        task_id = await k.journal.tasks.resolve_id(task_id)
        if not done and not text.strip():
            raise BadRequest("text", "is empty")
        event = None if event_id is None else (check_event_id(event_id), adapter)
        if not done and k.hooks.wants(HookPoint.PostUserInput):
            # the message kept is the one the handlers left (a refused one is not kept)
            said = await k.hooks.fire(
                HookPoint.PostUserInput,
                {"task_id": task_id, "kind": "message", "text": k.redactor.text(text)},
            )
            if said.blocked:
                raise BadRequest("text", f"was refused: {said.blocked}")
            text = str(said.changes.get("text", text))
        await k.journal.loops.send(task_id, k.redactor.text(text), done=done, event=event)
        k.audit.log("user_input", task_id=task_id, done=done)
        k.advance(task_id)
        return await k.journal.tasks.get(task_id)

    async def loop_context(self, task_id: str) -> ContextStats:
        """`/context`: how full a loop task's context is."""
        k = self._k
        task = await k.journal.tasks.get(await k.journal.tasks.resolve_id(task_id))
        if task.kind is not TaskKind.loop:
            raise BadRequest("task", f"{task.task_id} is a {task.kind.value} task, not a loop")
        return await loop_runner.context_stats(task.task_id, k.services)


def _as_option(a: ApprovalRecord, answer: Answer) -> Answer:
    """Approve and Deny in the question's own terms: its first option, and its way of
    saying no ("abandon" where it offers no "fail")."""
    if isinstance(answer, Approve):
        return answer_of(a.options[0])
    if isinstance(answer, Deny) and "deny" not in a.options:
        return Abandon() if "abandon" in a.options and "fail" not in a.options else Fail()
    return answer


def _answer_outcome(task: TaskRecord, approval: ApprovalRecord, answer: Answer) -> Move:
    """Where an answer sends the task: recovery's own question is answered alike for
    every kind of task; any other question by the task's runner. Only a task parked on
    this very question moves (a stale question's answer moves nothing)."""
    parked = task.payload
    if not isinstance(parked, AwaitingApproval) or parked.approval_id != approval.approval_id:
        raise TaskStateRefused(
            task.task_id,
            task.state.value,
            "answered",
            f"it is not waiting on question {approval.approval_id[:8]}",
        )
    if approval.action_type is QuestionKind.in_flight_deaths:
        return in_flight_answer(task, approval, answer)
    return runner_for(task).apply_answer(task, approval, answer)
