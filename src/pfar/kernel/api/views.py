"""The owner's questions and sessions as the operator API shows them: records of the
API's own, apart from the journal's rows they are read from, so a column can change
(or a row keep what only the kernel needs) without changing what a surface receives.
Each is built from its row in one place (`of`), and has one schema on the wire."""

from __future__ import annotations

from dataclasses import dataclass

from ...journal import ApprovalRecord, ApprovalStatus, CredentialPromptRecord, CredentialStatus
from ...journal.json_text import JsonObject
from ...journal.question_kinds import StoredQuestionKind
from ...journal.sessions import SessionRecord, SessionStatus


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """A question a task waits on (or waited on): what it asks, its options, the
    sha256 of the action an approval lets run, and who answered it."""

    approval_id: str
    task_id: str
    action_type: StoredQuestionKind  # a kind this pfar does not know is shown as stored
    description: str
    data_preview: str | None
    taint_level: str | None
    target_sink: str | None
    tool: str | None
    step: int | None
    created_at: str
    expires_at: str
    status: ApprovalStatus
    options: list[str]  # in the order offered (a list, as every surface has read it)
    decision: str | None
    decided_at: str | None
    prompts_sent: int
    args_sha256: str | None = None
    decided_by: str | None = None  # who answered, through which surface

    @classmethod
    def of(cls, a: ApprovalRecord) -> ApprovalView:
        return cls(
            approval_id=a.approval_id,
            task_id=a.task_id,
            action_type=a.action_type,
            description=a.description,
            data_preview=a.data_preview,
            taint_level=a.taint_level,
            target_sink=a.target_sink,
            tool=a.tool,
            step=a.step,
            created_at=a.created_at,
            expires_at=a.expires_at,
            status=a.status,
            options=list(a.options),
            decision=a.decision,
            decided_at=a.decided_at,
            prompts_sent=a.prompts_sent,
            args_sha256=a.args_sha256,
            decided_by=a.decided_by,
        )


@dataclass(frozen=True, slots=True)
class CredentialPromptView:
    """A task's request for a credential: which service, where the secret will be kept,
    and who provided it; never the secret."""

    prompt_id: str
    task_id: str
    service: str
    credential_type: str
    instructions: str
    vault_ref: str
    created_at: str
    expires_at: str
    status: CredentialStatus
    step: int | None
    received_at: str | None
    received_by: str | None = None

    @classmethod
    def of(cls, p: CredentialPromptRecord) -> CredentialPromptView:
        return cls(
            prompt_id=p.prompt_id,
            task_id=p.task_id,
            service=p.service,
            credential_type=p.credential_type,
            instructions=p.instructions,
            vault_ref=p.vault_ref,
            created_at=p.created_at,
            expires_at=p.expires_at,
            status=p.status,
            step=p.step,
            received_at=p.received_at,
            received_by=p.received_by,
        )


@dataclass(frozen=True, slots=True)
class SessionView:
    """A long-lived session: its project, its chat thread, its status and what pfar
    keeps of its context (the number of runs among it); `process` is its agent's
    process while it is active."""

    session_id: str
    project_path: str
    thread_id: str
    status: SessionStatus
    context: JsonObject
    created_at: str
    updated_at: str
    process: JsonObject | None

    @classmethod
    def of(cls, s: SessionRecord) -> SessionView:
        return cls(
            session_id=s.session_id,
            project_path=s.project_path,
            thread_id=s.thread_id,
            status=s.status,
            context=s.context,
            created_at=s.created_at,
            updated_at=s.updated_at,
            process=s.process,
        )
