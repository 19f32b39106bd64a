"""The arguments of the control socket's ops: one frozen record each, parsed once at
the edge (fields.py), and the same record a client builds its request from."""

from __future__ import annotations

from dataclasses import dataclass

from ...journal import TaskState
from ...journal.sessions import SessionStatus


@dataclass(frozen=True, slots=True)
class NoArgs:
    pass


@dataclass(frozen=True, slots=True)
class TaskArgs:
    task_id: str


@dataclass(frozen=True, slots=True)
class ConversationArgs:
    task_id: str
    after: int = -1


@dataclass(frozen=True, slots=True)
class SessionArgs:
    session_id: str


@dataclass(frozen=True, slots=True)
class ApprovalArgs:
    approval_id: str


@dataclass(frozen=True, slots=True)
class SubmitArgs:
    template: str
    text: str
    event_id: str | None = None
    adapter: str = "cli"


@dataclass(frozen=True, slots=True)
class TasksArgs:
    states: tuple[TaskState, ...] | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class QuestionsArgs:
    answered: bool = False


@dataclass(frozen=True, slots=True)
class AnswerArgs:
    approval_id: str
    decision: str


@dataclass(frozen=True, slots=True)
class CredentialArgs:
    prompt_id: str
    secret: str


@dataclass(frozen=True, slots=True)
class SecretArgs:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class SecretNameArgs:
    name: str


@dataclass(frozen=True, slots=True)
class WorkflowArgs:
    definition: str
    directory: str


@dataclass(frozen=True, slots=True)
class DirectoryArgs:
    directory: str


@dataclass(frozen=True, slots=True)
class SessionsArgs:
    status: SessionStatus | None = None


@dataclass(frozen=True, slots=True)
class NewSessionArgs:
    project_path: str
    thread_id: str


@dataclass(frozen=True, slots=True)
class LoopArgs:
    prompt: str
    directory: str
    tier: str = "worker"
    once: bool = False
    title: str = ""
    event_id: str | None = None
    adapter: str = "cli"
    worktree: bool = False
    priority: int = 0


@dataclass(frozen=True, slots=True)
class SendArgs:
    task_id: str
    text: str


@dataclass(frozen=True, slots=True)
class EventsArgs:
    after: int | None = None
    subscriber: str | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class LearningsArgs:
    search: str | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class LearningArgs:
    learning_id: str


@dataclass(frozen=True, slots=True)
class AckArgs:
    subscriber: str
    seq: int


@dataclass(frozen=True, slots=True)
class ConsoleTokenArgs:
    rotate: bool = False


@dataclass(frozen=True, slots=True)
class ActivityArgs:
    days: int = 30


@dataclass(frozen=True, slots=True)
class RecoveriesArgs:
    limit: int = 20
