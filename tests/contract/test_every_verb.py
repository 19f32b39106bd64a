"""The contract covers the whole protocol: every verb of every family has a test, and
every backend has every verb, awaiting where the protocol awaits."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

from pfar.journal import store as store_protocol

from . import __name__ as package
from .backends import Backend
from .verbs import claimed, families, protocol_verbs

HERE = Path(__file__).parent


def _claims() -> dict[str, set[str]]:
    """Verb -> the contract tests that claim it, read from every test module here."""
    found: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules([str(HERE)]):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for name, fn in vars(module).items():
            if name.startswith("test_") and callable(fn):
                for verb in claimed(fn):
                    found.setdefault(verb, set()).add(f"{info.name}.{name}")
    return found


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


def test_every_verb_of_every_family_has_a_contract_test() -> None:
    # a verb added to store.py without a test stating its contract fails here; that a
    # test calls the verbs it claims is checked as it runs (conftest.py)
    missing = sorted(protocol_verbs() - set(_claims()))
    assert not missing, f"verbs no contract test claims: {', '.join(missing)}"


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
        backend.close(store)
