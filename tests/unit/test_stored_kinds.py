"""The bus's event kinds and the owner messages' kinds are closed sets whose values are
the stored text; a stored row of a kind this pfar does not know is refused by name and
left as it is."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pfar.errors import MalformedRow
from pfar.journal.bus_sql import ARRIVAL, BusEventKind
from pfar.journal.sqlite import open_journal
from pfar.vault.driver import sqlite


def test_the_kinds_are_the_stored_names() -> None:
    assert {k.value for k in BusEventKind} == {
        "TaskCreated",
        "TaskStarted",
        "TaskQueued",
        "TaskScheduled",
        "TaskResumed",
        "TaskPaused",
        "TaskBlocked",
        "UserInputNeeded",
        "TaskCompleted",
        "TaskFailed",
        "TaskCancelled",
        "TaskAbandoned",
        "TaskRecovered",
        "TaskRetried",
        "LearningExtracted",
        "VaultLossAccepted",
    }
    assert all(isinstance(k, BusEventKind) for k in ARRIVAL.values())


def test_an_event_of_an_unknown_kind_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    journal = open_journal(path, create=True)
    try:
        asyncio.run(journal.events.publish(BusEventKind.LearningExtracted, None, {"n": 1}))
        with sqlite.connect(path) as conn:  # as a newer pfar (or a hand) might have
            conn.execute(
                "INSERT INTO bus_events(kind, task_id, body_json, at) "
                "VALUES ('TaskTeleported', NULL, '{}', '2025-01-01T00:00:00Z')"
            )
        with pytest.raises(MalformedRow) as caught:
            asyncio.run(journal.events.bus(0))
        assert caught.value.value == "TaskTeleported" and caught.value.field == "kind"
        assert "'TaskTeleported'" in str(caught.value) and "bus event 2" in str(caught.value)
        (first,) = asyncio.run(journal.events.bus(0, limit=1))  # those before it still read
        assert first.kind is BusEventKind.LearningExtracted
        assert first.to_json()["kind"] == "LearningExtracted"
    finally:
        asyncio.run(journal.aclose())
    with sqlite.connect(path) as conn:
        kinds = [r[0] for r in conn.execute("SELECT kind FROM bus_events ORDER BY seq")]
    assert kinds == ["LearningExtracted", "TaskTeleported"]  # nothing rewritten


def test_an_owner_message_of_an_unknown_kind_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    journal = open_journal(path, create=True)
    try:
        with sqlite.connect(path) as conn:
            conn.execute(
                "INSERT INTO owner_outbox(message_key, seq, sink, kind, body, created_at) "
                "VALUES ('result:t-1', 1, 'owner', 'hologram', 'hi', '2025-01-01T00:00:00Z')"
            )
        with pytest.raises(MalformedRow) as caught:
            asyncio.run(journal.events.pending())
        assert (caught.value.row, caught.value.value) == ("result:t-1", "hologram")
    finally:
        asyncio.run(journal.aclose())
    with sqlite.connect(path) as conn:
        assert conn.execute("SELECT kind FROM owner_outbox").fetchall() == [("hologram",)]
