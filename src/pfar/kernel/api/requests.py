"""The control socket's commands: one table from each op to its typed arguments and the
operator API verb it calls. A client builds a request from the same command
(`TASK_CANCEL.request(TaskArgs(task_id))`) that the socket parses (`parse`).

    {"op": "task_cancel", "task_id": "7f3c2a"}  ->  TaskArgs("7f3c2a")  ->  operator.cancel
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

from ...answers import parse_answer
from ...journal import TaskState
from ...journal.sessions import SessionStatus
from .fields import parse_fields
from .operator import Operator


class JsonRecord(Protocol):
    def to_json(self) -> dict[str, Any]: ...


Reply: TypeAlias = JsonRecord | Sequence[JsonRecord] | None
A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class Command(Generic[A]):
    """An op of the control socket: the record its fields are parsed into, the verb it
    calls, and whether a shutting-down kernel still takes it."""

    op: str
    arguments: type[A]
    verb: Callable[[Operator, A], Awaitable[Reply] | Reply]
    while_shutting_down: bool = False

    def parse(self, body: Mapping[str, Any]) -> A:
        """The arguments in `body`, every field checked (BadRequest names a bad one)."""
        return parse_fields(self.arguments, body)

    async def run(self, operator: Operator, arguments: A) -> Reply:
        reply = self.verb(operator, arguments)
        return await reply if inspect.isawaitable(reply) else reply

    def request(self, arguments: A) -> dict[str, Any]:
        """What a client sends for this command (enums go as their values)."""
        fields = dataclasses.fields(arguments)  # type: ignore[arg-type]
        return {"op": self.op, **{f.name: getattr(arguments, f.name) for f in fields}}


# -- the arguments -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoArgs:
    pass


@dataclass(frozen=True, slots=True)
class TaskArgs:
    task_id: str


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


# -- the table -------------------------------------------------------------------------

PING = Command("ping", NoArgs, lambda o, _: o.ping(), while_shutting_down=True)
STATUS = Command("status", NoArgs, lambda o, _: o.status(), while_shutting_down=True)
WAIT_IDLE = Command("wait_idle", NoArgs, lambda o, _: o.wait_idle(), while_shutting_down=True)
RELOAD = Command("reload", NoArgs, lambda o, _: o.reload())
WAIT_TASK = Command(
    "wait_task", TaskArgs, lambda o, a: o.wait_task(a.task_id), while_shutting_down=True
)
SHUTDOWN = Command("shutdown", NoArgs, lambda o, _: o.request_shutdown(), while_shutting_down=True)
SUBMIT = Command(
    "submit",
    SubmitArgs,
    lambda o, a: o.submit(a.template, a.text, event_id=a.event_id, adapter=a.adapter),
)
LOOP = Command(
    "loop",
    LoopArgs,
    lambda o, a: o.start_loop(
        a.prompt,
        a.directory,
        tier=a.tier,
        once=a.once,
        title=a.title,
        worktree=a.worktree,
        priority=a.priority,
        event_id=a.event_id,
        adapter=a.adapter,
    ),
)
SEND = Command("send", SendArgs, lambda o, a: o.send(a.task_id, a.text))
CHANNELS = Command("channels", NoArgs, lambda o, _: o.channels(), while_shutting_down=True)
EVENTS = Command(
    "events",
    EventsArgs,
    lambda o, a: o.events(a.after, subscriber=a.subscriber, limit=a.limit),
    while_shutting_down=True,
)
EVENTS_ACK = Command("events_ack", AckArgs, lambda o, a: o.ack_events(a.subscriber, a.seq))
QUEUE = Command("queue", NoArgs, lambda o, _: o.queue(), while_shutting_down=True)
LEARNINGS = Command("learnings", LearningsArgs, lambda o, a: o.learnings(a.search, a.limit))
LEARNING_FORGET = Command(
    "learning_forget", LearningArgs, lambda o, a: o.forget_learning(a.learning_id)
)
TASKS = Command("tasks", TasksArgs, lambda o, a: o.tasks(a.states, a.limit))
TASK_SHOW = Command("task_show", TaskArgs, lambda o, a: o.timeline(a.task_id))
TASK_CANCEL = Command("task_cancel", TaskArgs, lambda o, a: o.cancel(a.task_id))
TASK_PAUSE = Command("task_pause", TaskArgs, lambda o, a: o.pause(a.task_id))
TASK_RESUME = Command("task_resume", TaskArgs, lambda o, a: o.resume(a.task_id))
APPROVALS = Command("approvals", QuestionsArgs, lambda o, a: o.questions(answered=a.answered))
APPROVAL_SHOW = Command("approval_show", ApprovalArgs, lambda o, a: o.approval(a.approval_id))
ANSWER = Command(
    "answer", AnswerArgs, lambda o, a: o.answer(a.approval_id, parse_answer(a.decision))
)
CREDENTIAL = Command(
    "credential", CredentialArgs, lambda o, a: o.provide_credential(a.prompt_id, a.secret)
)
SECRET_SET = Command("secret_set", SecretArgs, lambda o, a: o.set_secret(a.name, a.value))
SECRET_RM = Command("secret_rm", SecretNameArgs, lambda o, a: o.remove_secret(a.name))
WORKFLOW_START = Command(
    "workflow_start", WorkflowArgs, lambda o, a: o.start_workflow(a.definition, a.directory)
)
WORKFLOW_RESUME = Command(
    "workflow_resume", DirectoryArgs, lambda o, a: o.resume_workflow(a.directory)
)
SESSIONS = Command("sessions", SessionsArgs, lambda o, a: o.sessions(a.status))
SESSION_SHOW = Command("session_show", SessionArgs, lambda o, a: o.session(a.session_id))
SESSION_NEW = Command(
    "session_new", NewSessionArgs, lambda o, a: o.new_session(a.project_path, a.thread_id)
)
SESSION_RESUME = Command("session_resume", SessionArgs, lambda o, a: o.resume_session(a.session_id))
SESSION_PAUSE = Command("session_pause", SessionArgs, lambda o, a: o.pause_session(a.session_id))
SESSION_TERMINATE = Command(
    "session_terminate", SessionArgs, lambda o, a: o.terminate_session(a.session_id)
)

COMMANDS: Final[Mapping[str, Command[Any]]] = {
    c.op: c
    for c in (
        PING,
        STATUS,
        WAIT_IDLE,
        WAIT_TASK,
        SHUTDOWN,
        RELOAD,
        SUBMIT,
        LOOP,
        SEND,
        CHANNELS,
        EVENTS,
        EVENTS_ACK,
        QUEUE,
        LEARNINGS,
        LEARNING_FORGET,
        TASKS,
        TASK_SHOW,
        TASK_CANCEL,
        TASK_PAUSE,
        TASK_RESUME,
        APPROVALS,
        APPROVAL_SHOW,
        ANSWER,
        CREDENTIAL,
        SECRET_SET,
        SECRET_RM,
        WORKFLOW_START,
        WORKFLOW_RESUME,
        SESSIONS,
        SESSION_SHOW,
        SESSION_NEW,
        SESSION_RESUME,
        SESSION_PAUSE,
        SESSION_TERMINATE,
    )
}
