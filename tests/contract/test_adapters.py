"""The adapter family's contract: each adapter's position, the inbound updates it
handled (each once), and the owner's messages as each chat channel delivers them."""

from __future__ import annotations

from pfar.journal import (
    TaskState,
)
from pfar.journal.store import Store

from .helpers import run
from .verbs import covers

S = TaskState


@covers("adapters.get", "adapters.put")
def test_adapter_state_is_replaced_whole(store: Store) -> None:
    assert run(store.adapters.get("telegram")) is None
    run(store.adapters.put("telegram", {"offset": 1, "chat": "x"}))
    run(store.adapters.put("telegram", {"offset": 2}))
    assert run(store.adapters.get("telegram")) == {"offset": 2}
