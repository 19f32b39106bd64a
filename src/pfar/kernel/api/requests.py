"""The control socket's commands: one table from each op to its typed arguments, the
operator API verb it calls and the record that verb answers with. A client builds a
request from the same command (`TASK_CANCEL.request(TaskArgs(task_id))`) that the
socket parses (`parse`), and reads the answer back into the verb's record
(`TASK_CANCEL.reply.parse(...)`): one schema each way (wire.py).

    {"op": "task_cancel", "task_id": "7f3c2a"}  ->  TaskArgs("7f3c2a")  ->  operator.cancel
    -> HoldResult  ->  {"task_id": ..., "state": "Cancelled", "outcome": "cancelled", ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...answers import parse_answer
from ...journal.bus_sql import BusEvent
from ...vault.knowledge import Learning
from ..admission import Waiting
from ..holds import HoldResult
from ..kernel import KernelStatistics
from ..reload import Reloaded
from ..retrying import RetryResult
from .activity import Activity
from .arguments import (
    AckArgs,
    ActivityArgs,
    AnswerArgs,
    ApprovalArgs,
    ConsoleTokenArgs,
    ConversationArgs,
    CostsArgs,
    CredentialArgs,
    EventsArgs,
    LearningArgs,
    LearningsArgs,
    LoopArgs,
    NoArgs,
    QuestionsArgs,
    RecoveriesArgs,
    SecretArgs,
    SecretNameArgs,
    SendArgs,
    SubmitArgs,
    TaskArgs,
    TaskPageArgs,
    TasksArgs,
)
from .command import Command
from .console_token import ConsoleToken
from .conversation_records import Conversation
from .costs import Costs
from .hooks_view import HookView
from .locks_view import LockView
from .mcp_view import MCP
from .providers_view import PROVIDERS
from .records import (
    Answered,
    BootRecovery,
    ChannelView,
    EventOffset,
    Pong,
    Questions,
    SecretStored,
    Sent,
    Submitted,
    TaskListing,
    TaskRef,
    TaskSummary,
    TaskTimeline,
)
from .session_requests import (
    SESSION_NEW,
    SESSION_PAUSE,
    SESSION_RESUME,
    SESSION_SHOW,
    SESSION_TERMINATE,
    SESSIONS,
    WORKFLOW_RESUME,
    WORKFLOW_START,
)
from .views import ApprovalView
from .wire import Wire

# -- the table -------------------------------------------------------------------------

PING = Command(
    "ping",
    NoArgs,
    lambda o, _: o.ping(),
    while_shutting_down=True,
    reply=Wire(Pong),
)
STATUS = Command(
    "status",
    NoArgs,
    lambda o, _: o.status(),
    while_shutting_down=True,
    reply=Wire(KernelStatistics),
)
WAIT_IDLE = Command(
    "wait_idle",
    NoArgs,
    lambda o, _: o.wait_idle(),
    while_shutting_down=True,
    reply=Wire(type(None)),
)
RELOAD = Command(
    "reload",
    NoArgs,
    lambda o, _: o.reload(),
    reply=Wire(Reloaded),
)
WAIT_TASK = Command(
    "wait_task",
    TaskArgs,
    lambda o, a: o.wait_task(a.task_id),
    while_shutting_down=True,
    reply=Wire(TaskSummary),
)
SHUTDOWN = Command(
    "shutdown",
    NoArgs,
    lambda o, _: o.request_shutdown(),
    while_shutting_down=True,
    reply=Wire(type(None)),
)
SUBMIT = Command(
    "submit",
    SubmitArgs,
    lambda o, a: o.submit(a.template, a.text, event_id=a.event_id, adapter=a.adapter),
    reply=Wire(Submitted),
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
    reply=Wire(Submitted),
)
SEND = Command(
    "send",
    SendArgs,
    lambda o, a: o.send(a.task_id, a.text),
    reply=Wire(Sent),
)
CHANNELS = Command(
    "channels",
    NoArgs,
    lambda o, _: o.channels(),
    while_shutting_down=True,
    reply=Wire(list[ChannelView]),
)
EVENTS = Command(
    "events",
    EventsArgs,
    lambda o, a: o.events(a.after, subscriber=a.subscriber, limit=a.limit),
    while_shutting_down=True,
    reply=Wire(list[BusEvent]),
)
EVENTS_ACK = Command(
    "events_ack",
    AckArgs,
    lambda o, a: o.ack_events(a.subscriber, a.seq),
    reply=Wire(EventOffset),
)
RECOVERIES = Command(
    "recoveries",
    RecoveriesArgs,
    lambda o, a: o.recoveries(a.limit),
    while_shutting_down=True,
    reply=Wire(list[BootRecovery]),
)
QUEUE = Command(
    "queue",
    NoArgs,
    lambda o, _: o.queue(),
    while_shutting_down=True,
    reply=Wire(list[Waiting]),
)
LOCKS = Command(
    "locks",
    NoArgs,
    lambda o, _: o.locks(),
    while_shutting_down=True,
    reply=Wire(list[LockView]),
)
HOOKS = Command(
    "hooks",
    NoArgs,
    lambda o, _: o.hooks(),
    while_shutting_down=True,
    reply=Wire(list[HookView]),
)
LEARNINGS = Command(
    "learnings",
    LearningsArgs,
    lambda o, a: o.learnings(a.search, a.limit),
    reply=Wire(list[Learning]),
)
LEARNING_FORGET = Command(
    "learning_forget",
    LearningArgs,
    lambda o, a: o.forget_learning(a.learning_id),
    reply=Wire(Learning),
)
TASKS = Command(
    "tasks",
    TasksArgs,
    lambda o, a: o.tasks(a.states, a.limit),
    reply=Wire(list[TaskSummary]),
)
ACTIVITY = Command(
    "activity",
    ActivityArgs,
    lambda o, a: o.activity(a.days),
    reply=Wire(Activity),
)
COSTS = Command("costs", CostsArgs, lambda o, a: o.costs(a.by, a.since, a.until), reply=Wire(Costs))
# a page record of its own, not `tasks`'s list: what scripts and chat read of that stays
TASK_PAGE = Command(
    "task_page",
    TaskPageArgs,
    lambda o, a: o.task_page(a.filter(), a.cursor, a.limit),
    reply=Wire(TaskListing),
)
TASK_SHOW = Command(
    "task_show",
    TaskArgs,
    lambda o, a: o.timeline(a.task_id),
    reply=Wire(TaskTimeline),
)
CONVERSATION = Command(
    "conversation",
    ConversationArgs,
    lambda o, a: o.conversation(a.task_id, a.after),
    while_shutting_down=True,
    reply=Wire(Conversation),
)
TASK_CANCEL = Command(
    "task_cancel",
    TaskArgs,
    lambda o, a: o.cancel(a.task_id),
    reply=Wire(HoldResult),
)
TASK_PAUSE = Command(
    "task_pause",
    TaskArgs,
    lambda o, a: o.pause(a.task_id),
    reply=Wire(HoldResult),
)
TASK_RESUME = Command(
    "task_resume",
    TaskArgs,
    lambda o, a: o.resume(a.task_id),
    reply=Wire(HoldResult),
)
TASK_RETRY = Command(
    "task_retry",
    TaskArgs,
    lambda o, a: o.retry(a.task_id),
    reply=Wire(RetryResult),
)
APPROVALS = Command(
    "approvals",
    QuestionsArgs,
    lambda o, a: o.questions(answered=a.answered),
    reply=Wire(Questions),
)
APPROVAL_SHOW = Command(
    "approval_show",
    ApprovalArgs,
    lambda o, a: o.approval(a.approval_id),
    reply=Wire(ApprovalView),
)
ANSWER = Command(
    "answer",
    AnswerArgs,
    lambda o, a: o.answer(a.approval_id, parse_answer(a.decision)),
    reply=Wire(Answered),
)
CREDENTIAL = Command(
    "credential",
    CredentialArgs,
    lambda o, a: o.provide_credential(a.prompt_id, a.secret),
    reply=Wire(TaskRef),
)
SECRET_SET = Command(
    "secret_set",
    SecretArgs,
    lambda o, a: o.set_secret(a.name, a.value),
    reply=Wire(SecretStored),
)
CONSOLE_TOKEN = Command(
    "console_token",
    ConsoleTokenArgs,
    lambda o, a: o.console_token(rotate=a.rotate),
    reply=Wire(ConsoleToken),
)
SECRET_RM = Command(
    "secret_rm",
    SecretNameArgs,
    lambda o, a: o.remove_secret(a.name),
    reply=Wire(SecretStored),
)

COMMANDS: Final[Mapping[str, Command[Any, Any]]] = {
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
        RECOVERIES,
        QUEUE,
        HOOKS,
        LOCKS,
        MCP,
        PROVIDERS,
        LEARNINGS,
        LEARNING_FORGET,
        TASKS,
        ACTIVITY,
        COSTS,
        TASK_PAGE,
        TASK_SHOW,
        CONVERSATION,
        TASK_CANCEL,
        TASK_PAUSE,
        TASK_RESUME,
        TASK_RETRY,
        APPROVALS,
        APPROVAL_SHOW,
        ANSWER,
        CREDENTIAL,
        SECRET_SET,
        SECRET_RM,
        CONSOLE_TOKEN,
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
