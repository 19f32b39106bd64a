"""Sessions written through the journal's group-commit writer: a session write and the
task writes waiting at the same moment share one commit, a refused one undoes none of
its neighbours, and a write is answered only once its commit is on disk."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import SessionStoreError, SessionThreadBusy
from pfar.journal import Journal, TaskState
from pfar.journal.payloads import Planning
from pfar.journal.sessions import SessionLifecycle, SessionManager, SessionStatus
from pfar.journal.sqlite import open_journal, open_sessions
from pfar.vault.driver import sqlite
from tests.contract.builders import task as make_task

S = SessionStatus


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = open_journal(tmp_path / "sessions.db", create=True)
    yield j
    j.close()


@pytest.fixture
def manager(journal: Journal) -> Iterator[SessionManager]:
    m = open_sessions(journal.path, writer=journal.writer)
    yield m
    m.close()


def committed_row(path: Path, session_id: str) -> tuple[Any, ...] | None:
    """The session's status and context as another connection sees them."""
    conn = sqlite.connect(path)
    try:
        row = conn.execute(
            "SELECT status, context FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else tuple(row)
    finally:
        conn.close()


def test_a_session_write_and_a_task_write_submitted_together_share_one_commit(
    journal: Journal, manager: SessionManager
) -> None:
    lifecycle = SessionLifecycle(manager)
    task = make_task()
    w = journal.writer

    async def together() -> None:
        commits0, writes0 = w.commits, w.writes
        session, _ = await asyncio.gather(manager.create("/p", "t1"), journal.tasks.create(task))
        assert (w.commits - commits0, w.writes - writes0) == (1, 2)

        commits0, writes0 = w.commits, w.writes
        moved, _ = await asyncio.gather(
            lifecycle.transition(session.session_id, S.CREATED, S.ACTIVE, context={"n": 1}),
            journal.tasks.transition(task.task_id, Planning(), point=None),
        )
        assert (w.commits - commits0, w.writes - writes0) == (1, 2)
        assert moved.status is S.ACTIVE

    asyncio.run(together())
    assert asyncio.run(journal.tasks.get(task.task_id)).state is TaskState.Planning
    [session] = asyncio.run(manager.list())
    assert session.status is S.ACTIVE and session.context == {"n": 1}


def test_a_refused_session_write_does_not_undo_the_task_write_it_shared_a_commit_with(
    journal: Journal, manager: SessionManager
) -> None:
    first = asyncio.run(manager.create("/p", "busy-thread"))
    task = make_task()
    w = journal.writer

    async def together() -> list[Any]:
        return await asyncio.gather(
            manager.create("/q", "busy-thread"), journal.tasks.create(task), return_exceptions=True
        )

    commits0 = w.commits
    refused, created = asyncio.run(together())
    assert w.commits - commits0 == 1
    assert isinstance(refused, SessionThreadBusy) and first.session_id in str(refused)
    assert created == (asyncio.run(journal.tasks.get(task.task_id)), True)
    assert [s.session_id for s in asyncio.run(manager.list())] == [first.session_id]


def test_a_session_write_is_answered_only_once_it_is_committed(
    journal: Journal, manager: SessionManager
) -> None:
    rec = asyncio.run(manager.create("/p", "t1"))
    seen: list[Any] = []

    async def watch() -> None:
        move = asyncio.ensure_future(
            SessionLifecycle(manager).transition(rec.session_id, S.CREATED, S.TERMINATED)
        )
        await asyncio.sleep(0)  # queued, the commit not yet run: the row is as it was
        seen.append(committed_row(journal.path, rec.session_id))
        await move
        seen.append(committed_row(journal.path, rec.session_id))

    asyncio.run(watch())
    assert seen == [("CREATED", "{}"), ("TERMINATED", "{}")]


def test_a_stopped_writer_refuses_session_writes_naming_the_file(
    journal: Journal, manager: SessionManager
) -> None:
    rec = asyncio.run(manager.create("/p", "t1"))
    journal.writer.close()
    with pytest.raises(SessionStoreError) as info:
        asyncio.run(manager.update(rec.session_id, context={"x": 1}))
    assert str(journal.path) in str(info.value) and "closed" in str(info.value)
    assert asyncio.run(manager.get(rec.session_id)) == rec
