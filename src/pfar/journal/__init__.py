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
    Move,
    OwnerMessage,
    Semantics,
    StepRecord,
    StepStatus,
    TaskKind,
    TaskRecord,
    TaskUpdate,
    UnreadableTask,
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
    "Move",
    "OwnerMessage",
    "PersistedTaskState",
    "Semantics",
    "StepRecord",
    "StepStatus",
    "TaskKind",
    "TaskRecord",
    "TaskState",
    "TaskUpdate",
    "UnreadableTask",
]
