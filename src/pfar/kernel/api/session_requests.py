"""The operator API's ops for long-lived sessions and traced workflows: each op's name,
its arguments' record, the verb it calls and the record it answers with (requests.py
holds the table of every op; these are listed there too)."""

from __future__ import annotations

from .arguments import DirectoryArgs, NewSessionArgs, SessionArgs, SessionsArgs, WorkflowArgs
from .command import Command
from .records import TaskRef
from .views import SessionView
from .wire import Wire

WORKFLOW_START = Command(
    "workflow_start",
    WorkflowArgs,
    lambda o, a: o.start_workflow(a.definition, a.directory),
    reply=Wire(TaskRef),
)
WORKFLOW_RESUME = Command(
    "workflow_resume",
    DirectoryArgs,
    lambda o, a: o.resume_workflow(a.directory),
    reply=Wire(TaskRef),
)
SESSIONS = Command(
    "sessions",
    SessionsArgs,
    lambda o, a: o.sessions(a.status),
    reply=Wire(list[SessionView]),
)
SESSION_SHOW = Command(
    "session_show",
    SessionArgs,
    lambda o, a: o.session(a.session_id),
    reply=Wire(SessionView),
)
SESSION_NEW = Command(
    "session_new",
    NewSessionArgs,
    lambda o, a: o.new_session(a.project_path, a.thread_id),
    reply=Wire(SessionView),
)
SESSION_RESUME = Command(
    "session_resume",
    SessionArgs,
    lambda o, a: o.resume_session(a.session_id),
    reply=Wire(SessionView),
)
SESSION_PAUSE = Command(
    "session_pause",
    SessionArgs,
    lambda o, a: o.pause_session(a.session_id),
    reply=Wire(SessionView),
)
SESSION_TERMINATE = Command(
    "session_terminate",
    SessionArgs,
    lambda o, a: o.terminate_session(a.session_id),
    reply=Wire(SessionView),
)
