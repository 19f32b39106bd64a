"""The journal: typed durable state of tasks, approvals, credential prompts and adapters."""

from .journal import Journal
from .records import (
    ApprovalRecord,
    ApprovalStatus,
    CompletedStep,
    CredentialPromptRecord,
    CredentialStatus,
    Idempotency,
    InboundEvent,
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskRecord,
)
from .states import PersistedTaskState, TaskState

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "CompletedStep",
    "CredentialPromptRecord",
    "CredentialStatus",
    "Idempotency",
    "InboundEvent",
    "Journal",
    "OwnerMessage",
    "PersistedTaskState",
    "Semantics",
    "StepRecord",
    "StepStatus",
    "TaskRecord",
    "TaskState",
]
