"""The contract covers the whole protocol: every verb of every family has a test, and
every backend has every verb, awaiting where the protocol awaits."""

from __future__ import annotations

import inspect
from pathlib import Path

from pfar.journal import store as store_protocol

from .backends import Backend
from .verbs import families, protocol_verbs

HERE = Path(__file__).parent


def test_the_protocol_is_read_whole() -> None:
    # every family `Store` names, each a protocol of its own with verbs in it
    assert set(families()) == {
        "tasks",
        "questions",
        "events",
        "adapters",
        "sessions",
        "loops",
        "locks",
    }
    for family, protocol in families().items():
        assert protocol is getattr(store_protocol, protocol.__name__), family
        assert any(v.startswith(f"{family}.") for v in protocol_verbs()), family


def test_the_store_has_every_verb_and_awaits_what_the_protocol_does(
    backend: Backend, store_path: Path
) -> None:
    # the contract's tests call the verbs they test; this names a verb the protocol
    # gained and the backend lacks, or one that blocks where the protocol awaits
    store = backend.open(store_path)
    try:
        for family, protocol in families().items():
            impl = getattr(store, family)
            for verb in sorted(v for v in protocol_verbs() if v.startswith(f"{family}.")):
                name = verb.partition(".")[2]
                assert hasattr(impl, name), f"{verb} is missing"
                wanted = inspect.iscoroutinefunction(getattr(protocol, name))
                got = inspect.iscoroutinefunction(getattr(impl, name))
                assert got == wanted, f"{verb}: async {got}, the protocol says {wanted}"
    finally:
        store.close()
