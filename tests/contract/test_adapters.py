"""The adapter family's contract: each adapter's position, and the inbound updates it
handled, each once (the channels' outbox is test_channels.py)."""

from __future__ import annotations

from pfar.journal.store import Store

from . import builders as b
from .helpers import run
from .verbs import covers


@covers("adapters.get", "adapters.put")
def test_adapter_state_is_replaced_whole(store: Store) -> None:
    assert run(store.adapters.get("telegram")) is None
    run(store.adapters.put("telegram", {"offset": 1, "chat": "x"}))
    run(store.adapters.put("telegram", {"offset": 2}))
    assert run(store.adapters.get("telegram")) == {"offset": 2}
    assert run(store.adapters.get("slack")) is None


@covers("adapters.ingested", "adapters.seen", "adapters.event_task")
def test_an_adapters_position_moves_with_the_updates_it_handled(store: Store) -> None:
    assert run(store.adapters.seen("u1")) is False
    assert run(store.adapters.event_task("u1")) is None
    run(store.adapters.ingested("telegram", {"offset": 2}, ["u1", "u2"]))
    assert run(store.adapters.get("telegram")) == {"offset": 2}
    assert run(store.adapters.seen("u1")) and run(store.adapters.seen("u2"))
    # handled, but no task's: '' (None is "never seen")
    assert run(store.adapters.event_task("u1")) == ""
    # updates delivered again are taken once: the position still moves
    run(store.adapters.ingested("telegram", {"offset": 3}, ["u2", "u3"]))
    assert run(store.adapters.get("telegram")) == {"offset": 3}
    assert run(store.adapters.seen("u3")) is True
    assert run(store.adapters.seen("u4")) is False


@covers("adapters.seen", "adapters.event_task", "adapters.ingested")
def test_an_update_that_made_a_task_names_it(store: Store) -> None:
    t = b.task(event_id="ev-9")
    run(store.tasks.create(t, b.event("ev-9")))
    assert run(store.adapters.seen("ev-9")) is True
    assert run(store.adapters.event_task("ev-9")) == t.task_id
    # the adapter's position recorded after the task: the update stays the task's
    run(store.adapters.ingested("contract", {"offset": 9}, ["ev-9"]))
    assert run(store.adapters.event_task("ev-9")) == t.task_id
