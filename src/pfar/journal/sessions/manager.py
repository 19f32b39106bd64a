"""The session manager: sessions read and written through a store's backing."""

from __future__ import annotations

import builtins
import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ...errors import (
    InvalidSessionContext,
    SessionStatusMismatch,
    SessionStoreError,
    SessionThreadBusy,
    VaultCorrupt,
    VaultIOError,
    WriteRefused,
)
from ..backing import Backing, Writer
from ..records import now_rfc3339
from ..tx import Tx
from .record import KEEP, ProcessArg, SessionRecord, check_thread_id, json_object
from .sessions_sql import COLUMNS, live_for_thread, resolve_session, session_row
from .status import CREATED_POINT, MOVE_POINTS, SessionStatus, check_session_transition

T = TypeVar("T")


class SessionManager:
    """Sessions, read and written through a store's backing.

    In a kernel, the journal's: a session write shares the writer's commits and
    fault points with the task writes waiting at the same moment. Opened on its own
    (`journal.sqlite.open_sessions`), a SQLite manager writes through a writer of its own,
    which refuses a write another connection locks out and goes on.
    """

    def __init__(self, db: Backing, *, on_close: Callable[[], None] | None = None) -> None:
        self._db = db
        self.path = db.where
        self._on_close = on_close

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
        except (VaultIOError, VaultCorrupt) as exc:  # the backing's words for a failed read
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
        return await self.read(
            f"reading session {session_id}", lambda c: resolve_session(c, session_id)
        )

    async def resolve_id(self, session_id: str) -> str:
        return (await self.get(session_id)).session_id

    async def list(self, status: SessionStatus | None = None) -> builtins.list[SessionRecord]:
        """Sessions, oldest first; only those in `status` when it is given."""

        def op(conn: Tx) -> builtins.list[SessionRecord]:
            if status is None:
                rows = conn.execute(
                    f"SELECT {COLUMNS} FROM sessions ORDER BY created_at, session_id"
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {COLUMNS} FROM sessions WHERE status = ? "
                    "ORDER BY created_at, session_id",
                    (SessionStatus(status).value,),
                ).fetchall()
            return [session_row(r) for r in rows]

        what = "listing sessions" if status is None else f"listing {status} sessions"
        return await self.read(what, op)

    async def live_for_thread(self, thread_id: str) -> SessionRecord | None:
        """The thread's live (not TERMINATED) session, if it has one."""
        return await self.read(
            f"reading the session of thread {thread_id!r}",
            lambda c: live_for_thread(c, thread_id),
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
            live = live_for_thread(conn, thread_id)
            if live is not None:
                raise SessionThreadBusy(thread_id, live.session_id, live.status.value)
            conn.execute(
                f"INSERT INTO sessions ({COLUMNS}) VALUES (?, ?, ?, ?, '{{}}', ?, ?, NULL)",
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
        return await self._apply(
            session_id,
            expect=src,
            status=dst,
            context=context,
            process=process,
            what=f"moving session {session_id} from {src} to {dst}",
        )

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
            rec = resolve_session(conn, session_id)
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
            context_text = json_object(sid, "context", merged)
            process_text = None if new_process is None else json_object(sid, "process", new_process)
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
