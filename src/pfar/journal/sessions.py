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
"""

from __future__ import annotations

import builtins
import json
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

from ..errors import (
    BadRequest,
    IllegalSessionTransition,
    InvalidSessionContext,
    SessionStatusMismatch,
    SessionStoreError,
    SessionThreadBusy,
    UnknownSession,
    VaultIOError,
    WriteRefused,
)
from ..vault.keys import VaultKey
from ..vault.sqlite import Synchronous, open_vault_db
from .backing import Backing, Writer
from .ids import resolve_id
from .records import now_rfc3339
from .sqlite.backing import SQLiteBacking
from .sqlite.connection import JournalConnection
from .sqlite.writer import GroupCommitWriter
from .tx import Tx

T = TypeVar("T")


class SessionStatus(StrEnum):
    CREATED = "CREATED"
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"

    @property
    def live(self) -> bool:
        """Holds its chat thread: every status but TERMINATED."""
        return self is not SessionStatus.TERMINATED


_S = SessionStatus

LEGAL_SESSION_MOVES: Final[Mapping[SessionStatus, frozenset[SessionStatus]]] = {
    _S.CREATED: frozenset({_S.ACTIVE, _S.TERMINATED}),
    _S.ACTIVE: frozenset({_S.PAUSED, _S.TERMINATED}),
    _S.PAUSED: frozenset({_S.ACTIVE, _S.TERMINATED}),
    _S.TERMINATED: frozenset(),
}


# the fault point each move passes once it is committed (faults.py)
MOVE_POINTS: Final[Mapping[SessionStatus, str]] = {
    _S.ACTIVE: "session_activated",
    _S.PAUSED: "session_paused",
    _S.TERMINATED: "session_terminated",
}
CREATED_POINT: Final = "session_created"


def is_legal_session_move(src: SessionStatus, dst: SessionStatus) -> bool:
    return dst in LEGAL_SESSION_MOVES[src]


def check_session_transition(session_id: str, src: SessionStatus, dst: SessionStatus) -> None:
    """Raise IllegalSessionTransition unless `src -> dst` is a legal move."""
    if not is_legal_session_move(src, dst):
        raise IllegalSessionTransition(session_id, src.value, dst.value)


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP
"""Leave `process` as it is (the default of `update` and `transition`)."""

ProcessArg: TypeAlias = dict[str, Any] | Literal[_Keep.KEEP] | None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One `sessions` row."""

    session_id: str
    project_path: str
    thread_id: str
    status: SessionStatus
    context: dict[str, Any]
    created_at: str
    updated_at: str
    process: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "project_path": self.project_path,
            "thread_id": self.thread_id,
            "status": self.status.value,
            "context": self.context,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "process": self.process,
        }


# A chat platform's thread id: it ends up in the agent's argv and its log, so it is
# plain (no shell or option syntax), and bounded.
THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+\-]{0,127}")


def check_thread_id(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not THREAD_ID.fullmatch(thread_id):
        raise BadRequest(
            "thread_id",
            f"{thread_id!r} is not a thread id: use 1 to 128 letters, digits and _ . : @ + - "
            "(starting with a letter or digit)",
        )
    return thread_id


# -- SQL -----------------------------------------------------------------------

_COLUMNS = (
    "session_id, project_path, thread_id, status, context, created_at, updated_at, process_json"
)


def _row(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(
        session_id=row[0],
        project_path=row[1],
        thread_id=row[2],
        status=SessionStatus(row[3]),
        context=json.loads(row[4]),
        created_at=row[5],
        updated_at=row[6],
        process=None if row[7] is None else json.loads(row[7]),
    )


def _fetch(conn: Tx, session_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else _row(row)


def _resolve(conn: Tx, session_id: str) -> SessionRecord:
    """The session with this id or, failing that, the one whose id starts with it."""
    full = resolve_id(conn, "sessions", "session_id", session_id, "session", UnknownSession)
    rec = _fetch(conn, full)
    if rec is None:  # gone between the two reads
        raise UnknownSession(session_id)
    return rec


def _live_for_thread(conn: Tx, thread_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE thread_id = ? AND status != 'TERMINATED'",
        (thread_id,),
    ).fetchone()
    return None if row is None else _row(row)


def _json_object(session_id: str, what: str, value: object) -> str:
    """`value` as JSON text, if it is a JSON object that reads back equal; else refuse it."""
    if not isinstance(value, dict):
        raise InvalidSessionContext(
            session_id, f"{what} must be a JSON object (a dict), not {type(value).__name__}"
        )
    try:
        text = json.dumps(
            value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise InvalidSessionContext(session_id, f"{what} is not plain JSON ({exc})") from None
    if json.loads(text) != value:
        raise InvalidSessionContext(
            session_id,
            f"{what} is not plain JSON: it would not read back the same "
            "(non-string keys, tuples or other non-JSON types)",
        )
    return text


# -- the manager ---------------------------------------------------------------


class SessionManager:
    """Sessions, read and written through a store's backing.

    In a kernel, the journal's: a session write shares the writer's commits and
    fault points with the task writes waiting at the same moment. Opened on its own
    (`SessionManager.open`), a SQLite manager writes through a writer of its own,
    which refuses a write another connection locks out and goes on.
    """

    def __init__(self, db: Backing, *, on_close: Callable[[], None] | None = None) -> None:
        self._db = db
        self.path = db.where
        self._on_close = on_close

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        key: VaultKey | None = None,
        create: bool = False,
        synchronous: Synchronous = "FULL",
        writer: GroupCommitWriter | None = None,
        readonly: bool = False,
    ) -> SessionManager:
        """Open (and migrate) sessions.db at `path`; write through `writer` when given."""
        conn = open_vault_db(
            path,
            "sessions",
            key=key,
            create=create,
            synchronous=synchronous,
            readonly=readonly,
            factory=JournalConnection,
        )
        assert isinstance(conn, JournalConnection)
        return cls.on_connection(conn, writer=writer)

    @classmethod
    def on_connection(
        cls, conn: JournalConnection, *, writer: GroupCommitWriter | None = None
    ) -> SessionManager:
        """A manager reading on `conn` (which it closes), writing through `writer`, or
        through a writer of its own on `conn` when none is given."""
        own = None if writer is not None else GroupCommitWriter(conn, stop_when_busy=False)

        def close() -> None:
            if own is not None:
                own.close()
            conn.close()

        return cls(SQLiteBacking(conn.path, conn, writer or own), on_close=close)

    def close(self) -> None:
        """Close what the manager opened (its own writer; a shared one stays open)."""
        if self._on_close is not None:
            self._on_close()

    @property
    def writer(self) -> Writer:
        return self._db.writer

    # -- transactions ----------------------------------------------------------

    async def read(self, what: str, op: Callable[[Tx], T]) -> T:
        """Run `op` outside a write transaction; a database error becomes SessionStoreError."""
        try:
            return await self._db.read(op)
        except Exception as exc:
            if self._db.dialect.failure(exc) is None:
                raise
            raise SessionStoreError(self.path, what, str(exc)) from exc

    async def write(self, what: str, op: Callable[[Tx], T], point: str | None = None) -> T:
        """Run `op` in the writer's next commit: committed whole, or rolled back.
        Returns once it is committed (and `point` passed)."""
        try:
            return await self._db.write(op, point)
        except (WriteRefused, VaultIOError) as exc:  # a stopped writer too: named here
            raise SessionStoreError(self.path, what, str(exc)) from exc

    # -- reads -----------------------------------------------------------------

    async def get(self, session_id: str) -> SessionRecord:
        """The session with this id, or with this unambiguous prefix (4 characters or more)."""
        return await self.read(f"reading session {session_id}", lambda c: _resolve(c, session_id))

    async def resolve_id(self, session_id: str) -> str:
        return (await self.get(session_id)).session_id

    async def list(self, status: SessionStatus | None = None) -> builtins.list[SessionRecord]:
        """Sessions, oldest first; only those in `status` when it is given."""

        def op(conn: Tx) -> builtins.list[SessionRecord]:
            if status is None:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM sessions ORDER BY created_at, session_id"
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM sessions WHERE status = ? "
                    "ORDER BY created_at, session_id",
                    (SessionStatus(status).value,),
                ).fetchall()
            return [_row(r) for r in rows]

        what = "listing sessions" if status is None else f"listing {status} sessions"
        return await self.read(what, op)

    async def live_for_thread(self, thread_id: str) -> SessionRecord | None:
        """The thread's live (not TERMINATED) session, if it has one."""
        return await self.read(
            f"reading the session of thread {thread_id!r}",
            lambda c: _live_for_thread(c, thread_id),
        )

    # -- writes ----------------------------------------------------------------

    async def create(self, project_path: str | os.PathLike[str], thread_id: str) -> SessionRecord:
        """A new CREATED session for `thread_id`; refused if the thread has a live one."""
        project = os.fspath(project_path)
        if not project:
            raise ValueError("project_path must not be empty")
        if not thread_id:
            raise ValueError("thread_id must not be empty")
        check_thread_id(thread_id)
        project = str(Path(project).expanduser().absolute())
        at = now_rfc3339()
        rec = SessionRecord(
            session_id=str(uuid.uuid4()),
            project_path=project,
            thread_id=thread_id,
            status=SessionStatus.CREATED,
            context={},
            created_at=at,
            updated_at=at,
            process=None,
        )

        def op(conn: Tx) -> SessionRecord:
            live = _live_for_thread(conn, thread_id)
            if live is not None:
                raise SessionThreadBusy(thread_id, live.session_id, live.status.value)
            conn.execute(
                f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, '{{}}', ?, ?, NULL)",
                (
                    rec.session_id,
                    rec.project_path,
                    rec.thread_id,
                    rec.status.value,
                    rec.created_at,
                    rec.updated_at,
                ),
            )
            return rec

        return await self.write(f"creating a session for thread {thread_id!r}", op, CREATED_POINT)

    async def update(
        self,
        session_id: str,
        *,
        context: Mapping[str, Any] | None = None,
        process: ProcessArg = KEEP,
    ) -> SessionRecord:
        """Merge `context` into the session's (top-level keys) and set or clear `process`.

        A process can be set only on an ACTIVE session (SessionStatusMismatch otherwise).
        """
        return await self._apply(
            session_id,
            expect=None,
            status=None,
            context=context,
            process=process,
            what=f"updating session {session_id}",
        )

    async def _apply(
        self,
        session_id: str,
        *,
        expect: SessionStatus | None,
        status: SessionStatus | None,
        context: Mapping[str, Any] | None,
        process: ProcessArg,
        what: str,
    ) -> SessionRecord:
        """The one write path: resolve, compare-and-set the status, merge, write the row."""

        def op(conn: Tx) -> SessionRecord:
            rec = _resolve(conn, session_id)
            sid = rec.session_id
            if expect is not None and rec.status is not expect:
                raise SessionStatusMismatch(sid, expect.value, rec.status.value)
            new_status = rec.status if status is None else status
            if process is KEEP:
                new_process = rec.process if new_status is SessionStatus.ACTIVE else None
            elif process is not None and new_status is not SessionStatus.ACTIVE:
                raise SessionStatusMismatch(sid, SessionStatus.ACTIVE.value, new_status.value)
            else:
                new_process = process
            if context is not None and not isinstance(context, Mapping):
                raise InvalidSessionContext(
                    sid, f"context must be a JSON object (a dict), not {type(context).__name__}"
                )
            merged = {**rec.context, **context} if context else rec.context
            context_text = _json_object(sid, "context", merged)
            process_text = (
                None if new_process is None else _json_object(sid, "process", new_process)
            )
            new = SessionRecord(
                session_id=sid,
                project_path=rec.project_path,
                thread_id=rec.thread_id,
                status=new_status,
                context=json.loads(context_text),
                created_at=rec.created_at,
                updated_at=now_rfc3339(),
                process=None if process_text is None else json.loads(process_text),
            )
            cur = conn.execute(
                "UPDATE sessions SET status = ?, context = ?, process_json = ?, updated_at = ? "
                "WHERE session_id = ? AND status = ?",
                (
                    new.status.value,
                    context_text,
                    process_text,
                    new.updated_at,
                    sid,
                    rec.status.value,
                ),
            )
            if cur.rowcount != 1:  # cannot happen inside the write transaction; refuse, not lie
                raise SessionStoreError(self.path, what, "the row changed under the transaction")
            return new

        point = None if status is None else MOVE_POINTS.get(status)
        return await self.write(what, op, point)


# -- the lifecycle -------------------------------------------------------------


class SessionLifecycle:
    """The session state machine over a `SessionManager`: checked, compare-and-set moves."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager

    async def transition(
        self,
        session_id: str,
        from_status: SessionStatus,
        to_status: SessionStatus,
        *,
        context: Mapping[str, Any] | None = None,
        process: ProcessArg = KEEP,
    ) -> SessionRecord:
        """Move the session from `from_status` to `to_status` in one transaction.

        Raises IllegalSessionTransition for a move the state machine forbids, and
        SessionStatusMismatch when the stored status is not `from_status` (nothing is
        changed then). `context` is merged and `process` set in the same transaction;
        leaving ACTIVE clears the process.
        """
        src, dst = SessionStatus(from_status), SessionStatus(to_status)
        check_session_transition(session_id, src, dst)
        if dst is not SessionStatus.ACTIVE and process is not KEEP and process is not None:
            raise ValueError(
                f"session {session_id}: only an ACTIVE session has a process, not {dst}"
            )
        return await self.manager._apply(
            session_id,
            expect=src,
            status=dst,
            context=context,
            process=process,
            what=f"moving session {session_id} from {src} to {dst}",
        )
