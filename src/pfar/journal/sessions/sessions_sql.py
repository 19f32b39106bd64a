"""The `sessions` table's reads, on a write's transaction or on a reader's connection."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...errors import UnknownSession
from ..ids import resolve_id
from ..tx import Tx
from .record import SessionRecord
from .status import SessionStatus

COLUMNS = (
    "session_id, project_path, thread_id, status, context, created_at, updated_at, process_json"
)


def session_row(row: Sequence[Any]) -> SessionRecord:
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


def fetch_session(conn: Tx, session_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else session_row(row)


def resolve_session(conn: Tx, session_id: str) -> SessionRecord:
    """The session with this id or, failing that, the one whose id starts with it."""
    full = resolve_id(conn, "sessions", "session_id", session_id, "session", UnknownSession)
    rec = fetch_session(conn, full)
    if rec is None:  # gone between the two reads
        raise UnknownSession(session_id)
    return rec


def live_for_thread(conn: Tx, thread_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM sessions WHERE thread_id = ? AND status != 'TERMINATED'",
        (thread_id,),
    ).fetchone()
    return None if row is None else session_row(row)
