"""What the journal keeps for the owner: the questions a task waits on (approvals,
credential prompts) and the messages sent to the owner."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import MalformedRow
from .message_key_parse import read_message_key
from .message_keys import MessageKey, MessageKind
from .question_kinds import StoredQuestionKind


class ApprovalStatus(StrEnum):
    pending = "pending"
    approved = "approved"
    denied = "denied"
    expired = "expired"
    recovered = "recovered"
    withdrawn = "withdrawn"  # its task was cancelled: the question no longer stands


class CredentialStatus(StrEnum):
    pending = "pending"
    received = "received"
    expired = "expired"
    withdrawn = "withdrawn"  # its task was cancelled


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One `pending_approvals` row: a question to the owner that a task waits on."""

    approval_id: str
    task_id: str
    # what it asks about; a stored kind this pfar does not know is kept as it is
    action_type: StoredQuestionKind
    description: str
    data_preview: str | None
    taint_level: str | None
    target_sink: str | None
    tool: str | None
    step: int | None
    created_at: str
    expires_at: str
    status: ApprovalStatus
    options: list[str]
    decision: str | None
    decided_at: str | None
    prompts_sent: int
    # sha256 of the canonical JSON of the arguments the owner was shown: an approval
    # lets exactly those run (see args_digest)
    args_sha256: str | None = None
    # who answered, through which surface ("cli (uid 1000, pid 4242)", "timeout")
    decided_by: str | None = None


@dataclass(frozen=True, slots=True)
class CredentialPromptRecord:
    """One `pending_credentials` row. Holds where the secret goes, never the secret."""

    prompt_id: str
    task_id: str
    service: str
    credential_type: str
    instructions: str
    vault_ref: str
    message_id: str | None
    created_at: str
    expires_at: str
    status: CredentialStatus
    step: int | None
    received_at: str | None
    received_by: str | None = None  # who provided it, through which surface


@dataclass(frozen=True, slots=True)
class OwnerMessage:
    """A message to the owner, keyed so that a resend after a crash is a no-op."""

    message_key: MessageKey  # stored as its text (journal/message_keys.py)
    kind: MessageKind
    body: str
    task_id: str | None = None
    sink: str = "owner"

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> OwnerMessage:
        """An `owner_outbox` row's (key, kind, body, task, sink): a key of no kind pfar
        writes is kept as it is (`OtherKey`), so every row is still delivered; a kind
        this pfar does not know (how would it show it?) is refused, naming the row."""
        try:
            kind = MessageKind(row[1])
        except ValueError:
            raise MalformedRow("owner message", str(row[0]), "kind", str(row[1])) from None
        return cls(read_message_key(row[0]), kind, row[2], row[3], row[4])


def args_digest(args: Any) -> str:
    """The sha256 of a tool call's arguments as canonical JSON: what an approval binds."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
