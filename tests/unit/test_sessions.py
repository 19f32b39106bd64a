"""Sessions on a real sessions.db made by pfar's migrations: the manager, the lifecycle
state machine (every pair of statuses), compare-and-set, context merging, one live
session per chat thread, and plain-JSON storage."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import uuid
from asyncio import run
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.errors import (
    AmbiguousId,
    IdPrefixTooShort,
    IllegalSessionTransition,
    InvalidSessionContext,
    PfarError,
    SessionStatusMismatch,
    SessionStoreError,
    SessionThreadBusy,
    UnknownSession,
    VaultError,
)
from pfar.journal.records import parse_rfc3339
from pfar.journal.sessions import (
    LEGAL_SESSION_MOVES,
    SessionLifecycle,
    SessionManager,
    SessionRecord,
    SessionStatus,
    check_session_transition,
    is_legal_session_move,
)
from pfar.journal.sqlite import open_sessions, sessions_on
from pfar.journal.sqlite.connection import JournalConnection
from pfar.vault.driver import sqlite
from pfar.vault.schema import schema_version
from pfar.vault.sqlite import connect, open_vault_db

S = SessionStatus

# the legal moves that bring a fresh (CREATED) session to each status
PATH_TO: dict[SessionStatus, list[SessionStatus]] = {
    S.CREATED: [],
    S.ACTIVE: [S.ACTIVE],
    S.PAUSED: [S.ACTIVE, S.PAUSED],
    S.TERMINATED: [S.TERMINATED],
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "vault" / "sessions.db"
    open_vault_db(path, "sessions", create=True, factory=JournalConnection).close()
    return path


@pytest.fixture
def manager(db: Path) -> Iterator[SessionManager]:
    m = sessions_on(open_vault_db(db, "sessions", factory=JournalConnection))
    yield m
    m.close()


@pytest.fixture
def lifecycle(manager: SessionManager) -> SessionLifecycle:
    return SessionLifecycle(manager)


def bring_to(lifecycle: SessionLifecycle, rec: SessionRecord, status: SessionStatus) -> None:
    current = rec.status
    for nxt in PATH_TO[status]:
        run(lifecycle.transition(rec.session_id, current, nxt))
        current = nxt


def raw_row(db: Path, session_id: str) -> dict[str, Any]:
    conn = sqlite.connect(db)
    conn.row_factory = sqlite.Row
    try:
        row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return dict(row)
    finally:
        conn.close()


# -- the migration ---------------------------------------------------------------


def test_migration_makes_the_sessions_table_and_its_indexes(db: Path) -> None:
    conn = connect(db)
    try:
        assert schema_version(conn) >= 2  # and whatever came after sessions
        cols = {r[1]: r for r in conn.execute("PRAGMA table_info(sessions)")}
        assert list(cols) == [
            "session_id",
            "project_path",
            "thread_id",
            "status",
            "context",
            "created_at",
            "updated_at",
            "process_json",
        ]
        assert cols["session_id"][5] == 1  # the primary key
        assert cols["context"][4] == "'{}'"  # default
        indexes = {r[1]: r for r in conn.execute("PRAGMA index_list(sessions)")}
        assert "idx_sessions_status" in indexes
        live = indexes["idx_sessions_live_thread"]
        assert live[2] == 1 and live[4] == 1  # unique, partial
    finally:
        conn.close()


def test_a_version_1_vault_is_migrated_to_sessions(tmp_path: Path) -> None:
    """An existing home (journal only) gains the sessions table and keeps its data."""
    path = tmp_path / "sessions.db"
    v1 = (
        resources.files("pfar.vault")
        .joinpath("migrations", "sessions_0001_journal.sql")
        .read_text(encoding="utf-8")
    )
    conn = sqlite.connect(path)
    conn.executescript(v1)
    conn.execute(
        "INSERT INTO schema_version VALUES (1, 'sessions_0001_journal.sql', '2025-01-01T00:00:00Z')"
    )
    conn.execute("INSERT INTO adapter_state VALUES ('cli', '{}', '2025-01-01T00:00:00.000000Z')")
    conn.commit()
    conn.close()
    conn = open_vault_db(path, "sessions", factory=JournalConnection)
    m = sessions_on(conn)
    try:
        assert schema_version(conn) >= 2
        assert conn.execute("SELECT adapter FROM adapter_state").fetchall() == [("cli",)]
        assert run(m.create("/p", "t")).status is S.CREATED
    finally:
        m.close()


def test_the_table_itself_refuses_unknown_statuses_and_non_object_context(db: Path) -> None:
    conn = sqlite.connect(db)
    row = ("id1", "/p", "t", "RUNNING", "{}", "x", "x", None)
    with pytest.raises(sqlite.IntegrityError):
        conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    with pytest.raises(sqlite.IntegrityError):
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("id1", "/p", "t", "CREATED", "[1]", "x", "x", None),
        )
    with pytest.raises(sqlite.IntegrityError):  # a process only while ACTIVE
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("id1", "/p", "t", "PAUSED", "{}", "x", "x", '{"pid": 1}'),
        )
    conn.close()


# -- the manager -----------------------------------------------------------------


def test_create_makes_a_created_session_that_survives_a_reopen(
    db: Path, manager: SessionManager
) -> None:
    rec = run(manager.create("/proj1", "t1"))
    assert uuid.UUID(rec.session_id)
    assert (rec.project_path, rec.thread_id, rec.status) == ("/proj1", "t1", S.CREATED)
    assert rec.context == {} and rec.process is None
    assert rec.created_at == rec.updated_at
    parse_rfc3339(rec.created_at)
    assert run(manager.get(rec.session_id)) == rec
    manager.close()
    again = open_sessions(db)
    try:
        assert run(again.get(rec.session_id)) == rec
    finally:
        again.close()


def test_create_keeps_an_absolute_project_path(
    manager: SessionManager, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    rec = run(manager.create("proj", "t1"))
    assert rec.project_path == str(tmp_path / "proj")
    with pytest.raises(ValueError, match="project_path"):
        run(manager.create("", "t2"))
    with pytest.raises(ValueError, match="thread_id"):
        run(manager.create("/p", ""))


def test_get_unknown_names_the_id(manager: SessionManager) -> None:
    with pytest.raises(UnknownSession, match="no session with id 'nope-123'"):
        run(manager.get("nope-123"))


def test_get_accepts_an_unambiguous_prefix_of_four_or_more(
    db: Path, manager: SessionManager
) -> None:
    rec = run(manager.create("/p", "t1"))
    assert run(manager.get(rec.session_id[:4])) == rec
    assert run(manager.get(rec.session_id[:10])) == rec
    assert run(manager.resolve_id(rec.session_id[:8])) == rec.session_id
    with pytest.raises(IdPrefixTooShort):
        run(manager.get(rec.session_id[:3]))
    # two ids sharing a prefix, written as another program would
    conn = sqlite.connect(db)
    for sid, thread in (("abcd-1111", "ta"), ("abcd-2222", "tb")):
        conn.execute(
            "INSERT INTO sessions VALUES (?, '/p', ?, 'CREATED', '{}', 'x', 'x', NULL)",
            (sid, thread),
        )
    conn.commit()
    conn.close()
    with pytest.raises(AmbiguousId, match="'abcd' matches more than one session"):
        run(manager.get("abcd"))
    assert run(manager.get("abcd-2")).session_id == "abcd-2222"
    # writes resolve prefixes the same way
    assert run(manager.update("abcd-1", context={"k": 1})).session_id == "abcd-1111"


def test_list_filters_by_status_oldest_first(
    manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    made = {s: run(manager.create(f"/p/{s}", f"t-{s}")) for s in S}
    for status, rec in made.items():
        bring_to(lifecycle, rec, status)
    assert [r.session_id for r in run(manager.list())] == [r.session_id for r in made.values()]
    for status, rec in made.items():
        listed = run(manager.list(status=status))
        assert [r.session_id for r in listed] == [rec.session_id]
        assert listed[0].status is status
    extra = run(manager.create("/p/x", "t-x"))
    run(lifecycle.transition(extra.session_id, S.CREATED, S.ACTIVE))
    assert [r.session_id for r in run(manager.list(status=S.ACTIVE))] == [
        made[S.ACTIVE].session_id,
        extra.session_id,
    ]


def test_update_merges_context_and_sets_updated_at(manager: SessionManager) -> None:
    rec = run(manager.create("/p", "t1"))
    one = run(manager.update(rec.session_id, context={"a": 1, "nested": {"x": 1}}))
    two = run(manager.update(rec.session_id, context={"b": [1, "two"], "nested": {"y": 2}}))
    assert two.context == {"a": 1, "b": [1, "two"], "nested": {"y": 2}}  # top-level merge
    assert run(manager.get(rec.session_id)) == two
    assert rec.updated_at <= one.updated_at <= two.updated_at
    assert two.created_at == rec.created_at
    assert run(manager.update(rec.session_id, context={})).context == two.context


def test_update_sets_and_clears_the_process_of_an_active_session_only(
    manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    proc = {"pid": 123, "start_time": 456, "argv": ["agent", "--x"]}
    with pytest.raises(SessionStatusMismatch, match="is CREATED, not ACTIVE"):
        run(manager.update(rec.session_id, process=proc))
    assert run(manager.get(rec.session_id)).process is None
    run(lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE))
    assert run(manager.update(rec.session_id, process=proc)).process == proc
    assert run(manager.update(rec.session_id, context={"k": "v"})).process == proc  # kept
    assert run(manager.update(rec.session_id, process=None)).process is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"x": object()}, "not plain JSON"),
        ({"x": {1, 2}}, "not plain JSON"),
        ({"x": b"bytes"}, "not plain JSON"),
        ({"x": float("nan")}, "not plain JSON"),
        ({"x": (1, 2)}, "would not read back the same"),
        ({"x": {1: "int key"}}, "would not read back the same"),
    ],
)
def test_context_is_plain_json_only(
    db: Path, manager: SessionManager, value: dict[str, Any], why: str
) -> None:
    rec = run(manager.create("/p", "t1"))
    run(manager.update(rec.session_id, context={"kept": True}))
    before = raw_row(db, rec.session_id)
    with pytest.raises(InvalidSessionContext, match=why) as info:
        run(manager.update(rec.session_id, context=value))
    assert rec.session_id in str(info.value)
    assert raw_row(db, rec.session_id) == before


def test_context_must_be_an_object(manager: SessionManager) -> None:
    rec = run(manager.create("/p", "t1"))
    with pytest.raises(InvalidSessionContext, match="must be a JSON object"):
        run(manager.update(rec.session_id, context=["not", "a", "dict"]))  # type: ignore[arg-type]


def test_context_is_stored_as_json_text_not_pickle(db: Path, manager: SessionManager) -> None:
    rec = run(manager.create("/p", "t1"))
    ctx = {"text": "héllo ✓", "n": 1.5, "list": [None, True], "obj": {"k": "v"}}
    run(manager.update(rec.session_id, context=ctx))
    raw = raw_row(db, rec.session_id)["context"]
    assert isinstance(raw, str)
    assert json.loads(raw) == ctx
    assert b"\x80" not in raw.encode()  # no pickle protocol header
    assert run(manager.get(rec.session_id)).context == ctx


def test_one_live_session_per_thread(
    db: Path, manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    first = run(manager.create("/p", "thread-1"))
    other = run(manager.create("/p", "thread-2"))  # another thread is independent
    with pytest.raises(SessionThreadBusy) as info:
        run(manager.create("/q", "thread-1"))
    assert first.session_id in str(info.value) and "'thread-1'" in str(info.value)
    for src, dst in ((S.CREATED, S.ACTIVE), (S.ACTIVE, S.PAUSED)):
        run(lifecycle.transition(first.session_id, src, dst))
        with pytest.raises(SessionThreadBusy, match=dst.value):
            run(manager.create("/q", "thread-1"))
    assert run(manager.live_for_thread("thread-1")) == asyncio.run(manager.get(first.session_id))
    run(lifecycle.transition(first.session_id, S.PAUSED, S.TERMINATED))
    assert run(manager.live_for_thread("thread-1")) is None
    second = run(manager.create("/q", "thread-1"))  # a terminated session frees its thread
    assert run(manager.live_for_thread("thread-1")) == second
    assert {r.thread_id for r in run(manager.list())} == {"thread-1", "thread-2"}
    assert other.status is S.CREATED
    # the unique index holds even for a writer that skips the manager
    conn = sqlite.connect(db)
    with pytest.raises(sqlite.IntegrityError):
        conn.execute(
            "INSERT INTO sessions VALUES ('x', '/p', 'thread-1', 'PAUSED', '{}', 'x', 'x', NULL)"
        )
    conn.close()


# -- the lifecycle ---------------------------------------------------------------


def test_the_legal_moves_are_exactly_these() -> None:
    legal = {(src, dst) for src in S for dst in S if is_legal_session_move(src, dst)}
    assert legal == {
        (S.CREATED, S.ACTIVE),
        (S.ACTIVE, S.PAUSED),
        (S.PAUSED, S.ACTIVE),
        (S.CREATED, S.TERMINATED),
        (S.ACTIVE, S.TERMINATED),
        (S.PAUSED, S.TERMINATED),
    }
    assert set(LEGAL_SESSION_MOVES) == set(S)
    assert {s for s in S if s.live} == {S.CREATED, S.ACTIVE, S.PAUSED}


def test_illegal_transition_names_the_session_and_both_states() -> None:
    with pytest.raises(IllegalSessionTransition) as info:
        check_session_transition("abc", S.TERMINATED, S.ACTIVE)
    assert str(info.value) == "session abc: cannot go from TERMINATED to ACTIVE"
    assert (info.value.session_id, info.value.src, info.value.dst) == (
        "abc",
        "TERMINATED",
        "ACTIVE",
    )


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)))
def test_every_pair_of_statuses(
    db: Path,
    manager: SessionManager,
    lifecycle: SessionLifecycle,
    src: SessionStatus,
    dst: SessionStatus,
) -> None:
    rec = run(manager.create("/p", "t1"))
    bring_to(lifecycle, rec, src)
    before = raw_row(db, rec.session_id)
    assert before["status"] == src.value
    if is_legal_session_move(src, dst):
        moved = run(lifecycle.transition(rec.session_id, src, dst, context={"moved": True}))
        assert moved.status is dst and moved.context == {"moved": True}
        assert run(manager.get(rec.session_id)) == moved
    else:
        with pytest.raises(IllegalSessionTransition) as info:
            run(lifecycle.transition(rec.session_id, src, dst))
        assert str(info.value) == (
            f"session {rec.session_id}: cannot go from {src.value} to {dst.value}"
        )
        assert raw_row(db, rec.session_id) == before


def test_transition_is_compare_and_set(
    db: Path, manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    run(lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE))
    before = raw_row(db, rec.session_id)
    # legal as a move, but the session is not CREATED any more
    with pytest.raises(SessionStatusMismatch) as info:
        run(lifecycle.transition(rec.session_id, S.CREATED, S.TERMINATED))
    assert info.value.actual == "ACTIVE" and info.value.expected == "CREATED"
    assert f"session {rec.session_id} is ACTIVE, not CREATED" in str(info.value)
    assert raw_row(db, rec.session_id) == before


def test_a_stale_second_connection_cannot_race_past_the_first(
    db: Path, manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    run(lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE))
    other = open_sessions(db)
    try:
        seen = run(other.get(rec.session_id))
        assert seen.status is S.ACTIVE
        run(lifecycle.transition(rec.session_id, S.ACTIVE, S.PAUSED))
        with pytest.raises(SessionStatusMismatch, match="is PAUSED, not ACTIVE"):
            run(SessionLifecycle(other).transition(seen.session_id, seen.status, S.TERMINATED))
        assert run(manager.get(rec.session_id)).status is S.PAUSED
    finally:
        other.close()


def test_racing_threads_move_a_session_exactly_once(
    db: Path, manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    run(lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE))
    racers = [open_sessions(db) for _ in range(6)]
    barrier = threading.Barrier(len(racers))
    outcomes: list[str] = []

    def race(m: SessionManager, i: int) -> None:
        barrier.wait()
        try:
            run(
                SessionLifecycle(m).transition(
                    rec.session_id, S.ACTIVE, S.PAUSED, context={"winner": i}
                )
            )
            outcomes.append("moved")
        except SessionStatusMismatch:
            outcomes.append("refused")

    threads = [threading.Thread(target=race, args=(m, i)) for i, m in enumerate(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for m in racers:
        m.close()
    assert sorted(outcomes) == ["moved"] + ["refused"] * (len(racers) - 1)
    final = run(manager.get(rec.session_id))
    assert final.status is S.PAUSED and "winner" in final.context


def test_transition_sets_context_and_process_together_and_leaving_active_clears_it(
    manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    proc = {"pid": 42, "start_time": 7, "argv": ["agent"]}
    active = run(
        lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE, context={"turn": 1}, process=proc)
    )
    assert (active.status, active.context, active.process) == (S.ACTIVE, {"turn": 1}, proc)
    paused = run(lifecycle.transition(rec.session_id, S.ACTIVE, S.PAUSED, context={"turn": 2}))
    assert paused.process is None and paused.context == {"turn": 2}
    with pytest.raises(ValueError, match="only an ACTIVE session has a process"):
        run(lifecycle.transition(rec.session_id, S.PAUSED, S.TERMINATED, process=proc))
    assert run(manager.get(rec.session_id)) == paused


def test_an_invalid_context_in_a_transition_changes_nothing(
    db: Path, manager: SessionManager, lifecycle: SessionLifecycle
) -> None:
    rec = run(manager.create("/p", "t1"))
    before = raw_row(db, rec.session_id)
    with pytest.raises(InvalidSessionContext):
        run(lifecycle.transition(rec.session_id, S.CREATED, S.ACTIVE, context={"bad": {1, 2}}))
    assert raw_row(db, rec.session_id) == before  # the status did not move either


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionManager]:
    path = tmp_path_factory.mktemp("props") / "sessions.db"
    m = sessions_on(
        open_vault_db(
            path, "sessions", create=True, synchronous="NORMAL", factory=JournalConnection
        )
    )
    yield m
    m.close()


@settings(max_examples=80, deadline=None)
@given(moves=st.lists(st.tuples(st.sampled_from(S), st.sampled_from(S)), max_size=10))
def test_random_move_sequences_follow_the_table(
    shared: SessionManager, moves: list[tuple[SessionStatus, SessionStatus]]
) -> None:
    """Any sequence of (claimed from, to) moves: legal and current -> done; else refused."""
    lifecycle = SessionLifecycle(shared)
    rec = run(shared.create("/p", f"thread-{uuid.uuid4()}"))
    status = S.CREATED
    for claimed, dst in moves:
        try:
            run(lifecycle.transition(rec.session_id, claimed, dst))
        except IllegalSessionTransition:
            assert not is_legal_session_move(claimed, dst)
        except SessionStatusMismatch as exc:
            assert is_legal_session_move(claimed, dst) and claimed is not status
            assert exc.actual == status.value
        else:
            assert is_legal_session_move(claimed, dst) and claimed is status
            status = dst
        assert run(shared.get(rec.session_id)).status is status


# -- database errors ---------------------------------------------------------------


def test_a_write_that_the_database_refuses_is_a_vault_error_naming_the_file(
    db: Path, manager: SessionManager
) -> None:
    rec = run(manager.create("/p", "t1"))
    ro_conn = open_vault_db(db, "sessions", readonly=True, factory=JournalConnection)
    readonly = sessions_on(ro_conn)
    try:
        assert asyncio.run(readonly.get(rec.session_id)) == rec  # reads work
        with pytest.raises(SessionStoreError) as info:
            run(readonly.update(rec.session_id, context={"x": 1}))
        assert isinstance(info.value, VaultError) and isinstance(info.value, PfarError)
        assert str(db) in str(info.value) and "nothing was changed" in str(info.value)
        with pytest.raises(SessionStoreError):
            run(readonly.create("/p", "t2"))
        assert not ro_conn.in_transaction  # rolled back, the connection still usable
        assert asyncio.run(readonly.get(rec.session_id)) == rec
    finally:
        readonly.close()
    assert run(manager.list()) == [rec]


def test_a_missing_table_is_a_vault_error_on_read(db: Path, manager: SessionManager) -> None:
    conn = sqlite.connect(db)
    conn.execute("DROP TABLE sessions")
    conn.commit()
    conn.close()
    with pytest.raises(SessionStoreError, match="no such table: sessions"):
        run(manager.list())
