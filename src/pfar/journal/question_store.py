"""The SQLite question store: approvals and credential prompts (`store.QuestionStore`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..answers import Answer
from ..errors import (
    AlreadyDecided,
    AnswerDoesNotFit,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownTask,
)
from . import approvals_sql, events_sql, loops_sql, payloads, tasks_sql
from .backing import Backing
from .ids import resolve_id
from .moves import fail_parked_txn, park_approval_txn, transition_txn
from .question_kinds import QuestionKind
from .records import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    Move,
    OwnerMessage,
    TaskRecord,
    now_rfc3339,
)
from .states import TaskState
from .tx import Tx


class SQLiteQuestionStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def approval(self, approval_id: str) -> ApprovalRecord:
        rec = await self._db.read(approvals_sql.get_approval, approval_id)
        if rec is None:
            raise UnknownApproval(approval_id)
        return rec

    async def approvals(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[ApprovalRecord]:
        return await self._db.scan(approvals_sql.approvals_with_status, statuses, limit)

    async def approvals_for_task(self, task_id: str) -> list[ApprovalRecord]:
        return await self._db.read(approvals_sql.approvals_for_task, task_id)

    async def resolve_approval_id(self, prefix: str) -> str:
        return await self._db.read(
            resolve_id, "pending_approvals", "approval_id", prefix, "approval", UnknownApproval
        )

    async def credential_prompt(self, prompt_id: str) -> CredentialPromptRecord:
        rec = await self._db.read(approvals_sql.get_credential, prompt_id)
        if rec is None:
            raise UnknownCredentialPrompt(prompt_id)
        return rec

    async def credential_prompts(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[CredentialPromptRecord]:
        return await self._db.scan(approvals_sql.credentials_with_status, statuses, limit)

    async def credential_prompts_for_task(self, task_id: str) -> list[CredentialPromptRecord]:
        return await self._db.read(approvals_sql.credentials_for_task, task_id)

    async def resolve_prompt_id(self, prefix: str) -> str:
        return await self._db.read(
            resolve_id,
            "pending_credentials",
            "prompt_id",
            prefix,
            "credential prompt",
            UnknownCredentialPrompt,
        )

    async def next_deadline(self) -> str | None:
        return await self._db.read(approvals_sql.next_deadline)

    async def park_approval(
        self,
        approval: ApprovalRecord,
        message: OwnerMessage | None,
        parked: payloads.AwaitingApproval,
    ) -> None:
        """Insert the approval, park the task on it (`parked`, whose approval_id is the
        approval's), and queue the prompt: one commit. No `message`: the question has no
        prompt of its own (the owner was told of it by another: a day's spend cap)."""

        def op(conn: Tx) -> None:
            park_approval_txn(conn, approval, parked)
            if message is not None:
                events_sql.enqueue_message_txn(conn, message, approval.created_at)
                approvals_sql.count_prompt_txn(conn, approval.approval_id)

        await self._db.write(op, "approval_parked")

    async def park_credential(self, prompt: CredentialPromptRecord, message: OwnerMessage) -> None:
        def op(conn: Tx) -> None:
            approvals_sql.insert_credential_txn(conn, prompt)
            transition_txn(
                conn,
                prompt.task_id,
                payloads.AwaitingCredential(
                    prompt_id=prompt.prompt_id,
                    service=prompt.service,
                    prompt_message_id=message.message_key.text,
                    step=prompt.step or 0,
                ),
            )
            approvals_sql.set_credential_message_txn(
                conn, prompt.prompt_id, message.message_key.text
            )
            events_sql.enqueue_message_txn(conn, message, prompt.created_at)

        await self._db.write(op, "credential_parked")

    async def decide_approval(
        self,
        approval_id: str,
        answer: Answer,
        *,
        resume_to: Callable[[TaskRecord, ApprovalRecord, Answer], Move],
        by: str,
    ) -> tuple[ApprovalRecord, bool]:
        """Record the owner's answer (one of the approval's options) and move the task,
        once.

        A replay of the same answer changes nothing and returns `(approval, False)`;
        a different answer to a decided approval raises AlreadyDecided, and one the
        approval does not offer AnswerDoesNotFit. `resume_to` maps (task, approval,
        answer) to where the task goes; `by` (who answered, through which surface) is
        kept with the answer.
        """
        decision = answer.kind

        def op(conn: Tx) -> tuple[ApprovalRecord, bool]:
            a = approvals_sql.get_approval(conn, approval_id)
            if a is None:
                raise UnknownApproval(approval_id)
            if a.status is not ApprovalStatus.pending:
                if a.decision == decision:
                    return a, False
                raise AlreadyDecided("approval", approval_id, _decided_text(a))
            if decision not in a.options:
                raise AnswerDoesNotFit(approval_id, decision, a.options)
            at = now_rfc3339()
            status = (
                ApprovalStatus.denied
                if decision in ("deny", "fail", "skip", "abandon", "never")
                else ApprovalStatus.approved
            )
            approvals_sql.decide_approval_txn(conn, approval_id, status, decision, at, by)
            task = tasks_sql.get(conn, a.task_id)
            if task is None:
                raise UnknownTask(a.task_id)
            move = resume_to(task, a, answer)
            transition_txn(conn, a.task_id, move.to, move.update)
            if move.remember is not None:
                loops_sql.put_rule_txn(conn, move.remember, at)
            decided = approvals_sql.get_approval(conn, approval_id)
            assert decided is not None
            return decided, True

        return await self._db.write(op, "approval_decided")

    async def receive_credential(
        self, prompt_id: str, by: str
    ) -> tuple[CredentialPromptRecord, bool]:
        """Mark a prompt answered by `by` and resume its task (the secret is already in
        secrets.db)."""

        def op(conn: Tx) -> tuple[CredentialPromptRecord, bool]:
            p = approvals_sql.get_credential(conn, prompt_id)
            if p is None:
                raise UnknownCredentialPrompt(prompt_id)
            if p.status is not CredentialStatus.pending:
                raise AlreadyDecided("credential prompt", prompt_id, prompt_status_text(p))
            at = now_rfc3339()
            approvals_sql.set_credential_status_txn(
                conn, prompt_id, CredentialStatus.received, at, by
            )
            transition_txn(conn, p.task_id, payloads.Executing(current_step=p.step or 0))
            done = approvals_sql.get_credential(conn, prompt_id)
            assert done is not None
            return done, True

        return await self._db.write(op, "credential_received")

    async def expire_due(self, now: str) -> list[tuple[str, str | None]]:
        """Expire approvals and prompts past their deadline; fail their tasks.

        Returns (task_id, error) for each task failed, and (task_id, None) for each task
        that goes on: a loop's permission prompt left unanswered is a "No" (seed 001,
        5.3), so its call is skipped and the loop continues.
        """

        def op(conn: Tx) -> list[tuple[str, str | None]]:
            failed: list[tuple[str, str | None]] = []
            for a in approvals_sql.approvals_with_status(conn, ["pending"], 10_000):
                if a.expires_at > now:
                    continue
                approvals_sql.decide_approval_txn(
                    conn, a.approval_id, ApprovalStatus.expired, "expired", now, "timeout"
                )
                parked = tasks_sql.get_state(conn, a.task_id)
                if (
                    a.action_type is QuestionKind.permission
                    and parked is TaskState.AwaitingApproval
                ):
                    step = a.step or 0
                    transition_txn(
                        conn, a.task_id, payloads.Executing(current_step=step, skip_step=step)
                    )
                    failed.append((a.task_id, None))
                    continue
                failed += fail_parked_txn(conn, a.task_id, "approval timeout")
            for p in approvals_sql.credentials_with_status(conn, ["pending"], 10_000):
                if p.expires_at > now:
                    continue
                approvals_sql.set_credential_status_txn(
                    conn, p.prompt_id, CredentialStatus.expired, now, "timeout"
                )
                failed += fail_parked_txn(conn, p.task_id, "credential prompt timeout")
            return failed

        return await self._db.write(op, "failed")

    async def supersede_old_prompts(self) -> int:
        def op(conn: Tx) -> int:
            return events_sql.supersede_prompts_txn(conn, now_rfc3339())

        return await self._db.write(op, None)


def prompt_status_text(p: CredentialPromptRecord) -> str:
    if p.status is CredentialStatus.withdrawn:
        return "withdrawn because its task was cancelled"
    return p.status.value


def _decided_text(a: ApprovalRecord) -> str:
    when = f" at {a.decided_at}" if a.decided_at else ""
    if a.status is ApprovalStatus.expired:
        return f"expired{when}"
    if a.status is ApprovalStatus.withdrawn:
        return f"withdrawn{when} because its task was cancelled"
    return f"{a.status.value} ({a.decision}){when}"
