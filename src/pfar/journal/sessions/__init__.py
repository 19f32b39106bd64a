"""Agent sessions: one per chat thread and project, kept in the `sessions` table of sessions.db.

A session moves CREATED -> ACTIVE <-> PAUSED, and from any of those to
TERMINATED (`SessionLifecycle`). A chat thread has at most one live (not
TERMINATED) session. `context` is a JSON object that updates merge into;
`process` names the agent subprocess (pid, start_time, argv) and is kept only
while the session is ACTIVE: leaving ACTIVE clears it.

Every write is an operation submitted to a group-commit writer (`writer.py`):
the journal's own, in a kernel, so a session write and the task writes waiting
at the same moment share one commit. The operation reads the row it changes
inside the writer's transaction, so a compare-and-set transition cannot be raced
past by another connection; on any error its savepoint is rolled back and the
row is as it was. A write returns once it is committed, after its fault point
(`session_created`, `session_activated`, `session_paused`,
`session_terminated`) has been passed. A database error is raised as
`SessionStoreError`, which names the file. Reads use the manager's own
connection.

The modules: `status` (the statuses and the legal moves), `record` (a session and what
its row may hold), `sessions_sql` (the table's reads), `manager` (`SessionManager`: reads
and writes) and `lifecycle` (`SessionLifecycle`: the checked moves).
"""

from .lifecycle import SessionLifecycle
from .manager import SessionManager
from .record import KEEP, THREAD_ID, ProcessArg, SessionRecord, check_thread_id
from .status import (
    CREATED_POINT,
    LEGAL_SESSION_MOVES,
    MOVE_POINTS,
    SessionStatus,
    check_session_transition,
    is_legal_session_move,
)

__all__ = [
    "CREATED_POINT",
    "KEEP",
    "LEGAL_SESSION_MOVES",
    "MOVE_POINTS",
    "THREAD_ID",
    "ProcessArg",
    "SessionLifecycle",
    "SessionManager",
    "SessionRecord",
    "SessionStatus",
    "check_session_transition",
    "check_thread_id",
    "is_legal_session_move",
]
