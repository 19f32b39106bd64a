"""The arguments of the control socket's ops: one frozen record each, parsed once at
the edge (fields.py), and the same record a client builds its request from."""

from __future__ import annotations

from dataclasses import dataclass

from ...journal import TaskKind, TaskState
from ...journal.sessions import SessionStatus
from ...journal.task_pages import TaskFilter


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
class TaskPageArgs:
    """A page of the task list: each filter given narrows it (times RFC 3339; `since`
    inclusive, `until` exclusive; `text` a case-insensitive piece of the task's text),
    and `cursor` is the `next_cursor` of the page before."""

    states: tuple[TaskState, ...] | None = None
    kind: TaskKind | None = None
    template: str | None = None
    since: str | None = None
    until: str | None = None
    text: str | None = None
    cursor: str | None = None
    limit: int = 50

    def filter(self) -> TaskFilter:
        """The filter as given (the verb checks it: task_query.py)."""
        return TaskFilter(
            states=self.states or (),
            kind=self.kind,
            template_id=self.template,
            created_since=self.since,
            created_until=self.until,
            text=self.text,
        )


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
class CostsArgs:
    by: str = "day"  # day, model, template or task
    since: str | None = None  # a UTC day, YYYY-MM-DD, included
    until: str | None = None  # a UTC day, YYYY-MM-DD, included


@dataclass(frozen=True, slots=True)
class RecoveriesArgs:
    limit: int = 20
