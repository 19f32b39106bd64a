"""The session family's contract: a session per chat thread (at most one live), read by
its id or a prefix of it, listed oldest first."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.errors import (
    BadRequest,
    IdPrefixTooShort,
    IllegalSessionTransition,
    SessionStatusMismatch,
    SessionThreadBusy,
    UnknownSession,
)
from pfar.journal.sessions import SessionStatus
from pfar.journal.store import Store

from .helpers import run
from .verbs import covers


@covers("sessions.create", "sessions.get", "sessions.live_for_thread")
def test_a_session_is_created_for_its_thread(store: Store, tmp_path: Path) -> None:
    assert run(store.sessions.live_for_thread("chat-1")) is None
    s = run(store.sessions.create(str(tmp_path / "proj"), "chat-1"))
    assert (s.project_path, s.thread_id, s.status) == (
        str(tmp_path / "proj"),
        "chat-1",
        SessionStatus.CREATED,
    )
    assert (s.context, s.process, s.created_at) == ({}, None, s.updated_at)
    assert run(store.sessions.get(s.session_id)) == s
    assert run(store.sessions.live_for_thread("chat-1")) == s
    assert run(store.sessions.live_for_thread("chat-2")) is None


@covers("sessions.create", "sessions.list")
def test_a_thread_has_at_most_one_live_session(store: Store, tmp_path: Path) -> None:
    s = run(store.sessions.create(str(tmp_path), "chat-1"))
    with pytest.raises(SessionThreadBusy) as info:
        run(store.sessions.create(str(tmp_path / "other"), "chat-1"))
    assert info.value.session_id == s.session_id
    # a thread id is plain, and a project is named
    with pytest.raises(BadRequest):
        run(store.sessions.create(str(tmp_path), "-rf; ls"))
    with pytest.raises(ValueError):
        run(store.sessions.create("", "chat-2"))
    assert run(store.sessions.list()) == [s]


@covers("sessions.list")
def test_sessions_are_listed_oldest_first_and_by_status(store: Store, tmp_path: Path) -> None:
    assert run(store.sessions.list()) == []
    made = [run(store.sessions.create(str(tmp_path), f"chat-{i}")) for i in range(3)]
    assert run(store.sessions.list()) == made
    assert run(store.sessions.list(SessionStatus.CREATED)) == made
    assert run(store.sessions.list(SessionStatus.ACTIVE)) == []


@covers("sessions.get", "sessions.resolve_id")
def test_a_session_is_found_by_its_id_or_a_prefix(store: Store, tmp_path: Path) -> None:
    s = run(store.sessions.create(str(tmp_path), "chat-1"))
    t = run(store.sessions.create(str(tmp_path), "chat-2"))
    assert run(store.sessions.resolve_id(s.session_id)) == s.session_id
    assert run(store.sessions.resolve_id(s.session_id[:8])) == s.session_id
    assert run(store.sessions.get(t.session_id[:8])) == t
    with pytest.raises(IdPrefixTooShort):
        run(store.sessions.resolve_id(s.session_id[:3]))
    with pytest.raises(UnknownSession, match="'zzzzzzzz'"):
        run(store.sessions.get("zzzzzzzz"))
    with pytest.raises(UnknownSession):
        run(store.sessions.resolve_id("zzzzzzzz"))


@covers("sessions.transition")
def test_a_session_moves_as_its_state_machine_allows(store: Store, tmp_path: Path) -> None:
    s = run(store.sessions.create(str(tmp_path), "chat-1"))
    process = {"pid": 4242, "start_time": 1, "argv": ["agent"]}
    active = run(
        store.sessions.transition(
            s.session_id,
            SessionStatus.CREATED,
            SessionStatus.ACTIVE,
            context={"runs": 1},
            process=process,
        )
    )
    assert (active.status, active.context, active.process) == (
        SessionStatus.ACTIVE,
        {"runs": 1},
        process,
    )
    # leaving ACTIVE clears the process; the context is merged into
    paused = run(
        store.sessions.transition(
            s.session_id, SessionStatus.ACTIVE, SessionStatus.PAUSED, context={"exit": 0}
        )
    )
    assert (paused.status, paused.context, paused.process) == (
        SessionStatus.PAUSED,
        {"runs": 1, "exit": 0},
        None,
    )
    assert run(store.sessions.get(s.session_id)) == paused
    with pytest.raises(SessionStatusMismatch):
        run(store.sessions.transition(s.session_id, SessionStatus.ACTIVE, SessionStatus.PAUSED))
    with pytest.raises(IllegalSessionTransition):
        run(store.sessions.transition(s.session_id, SessionStatus.PAUSED, SessionStatus.CREATED))
    assert run(store.sessions.get(s.session_id)) == paused
