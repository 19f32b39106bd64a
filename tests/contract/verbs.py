"""Which store verbs the contract tests: the protocol's verbs, and the tests that claim them.

The verbs are read from `pfar.journal.store` itself: each family is a property of
`Store` whose return annotation is the family's protocol, and each public callable
of that protocol is a verb. A contract test names the verbs it is about with
`@covers("tasks.create", ...)`; a name that is no verb fails at import.

A claim is checked twice. `test_every_verb.py` fails when some verb of the protocol
is claimed by no test (a verb added without its contract). And the `store` fixture
hands a test a `RecordingStore`, which notes each verb called through it: a test
that passes without calling a verb it claims fails (conftest.py), so a claim cannot
stand in for a test.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pfar.journal import store as store_protocol
from pfar.journal.store import Store

F = TypeVar("F", bound=Callable[..., Any])

# the attribute a test function carries its claimed verbs in
CLAIMED = "__contract_verbs__"


@functools.cache
def families() -> dict[str, type]:
    """Family name (a property of `Store` that is one of its `...Store` protocols) -> its
    protocol class (the writer, the path and where the store is are no family)."""
    found: dict[str, type] = {}
    for name, member in vars(store_protocol.Store).items():
        if isinstance(member, property) and member.fget is not None:
            family = typing.get_type_hints(member.fget)["return"]
            if isinstance(family, type) and family.__name__.endswith("Store"):
                found[name] = family
    return found


@functools.cache
def protocol_verbs() -> frozenset[str]:
    """Every verb of every family, as "family.verb"."""
    return frozenset(
        f"{family}.{name}"
        for family, protocol in families().items()
        for name, member in vars(protocol).items()
        if callable(member) and not name.startswith("_")
    )


def covers(*verbs: str) -> Callable[[F], F]:
    """Mark a contract test as stating the contract of `verbs` ("family.verb")."""
    unknown = sorted(set(verbs) - protocol_verbs())
    if unknown or not verbs:
        raise ValueError(f"not verbs of the store protocol: {unknown or 'none given'}")

    def mark(fn: F) -> F:
        setattr(fn, CLAIMED, frozenset(verbs) | getattr(fn, CLAIMED, frozenset()))
        return fn

    return mark


def claimed(fn: object) -> frozenset[str]:
    return cast(frozenset[str], getattr(fn, CLAIMED, frozenset()))


class _RecordingFamily:
    __slots__ = ("_calls", "_family", "_inner")

    def __init__(self, inner: object, family: str, calls: set[str]) -> None:
        self._inner, self._family, self._calls = inner, family, calls

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._inner, name)
        if not callable(member) or name.startswith("_"):
            return member
        verb = f"{self._family}.{name}"
        calls = self._calls

        def called(*args: Any, **kwargs: Any) -> Any:
            calls.add(verb)
            return member(*args, **kwargs)

        return called


class RecordingStore:
    """A store that notes, in `calls`, each "family.verb" called through it; everything
    else (closing it, a backend's own attributes) is the store's."""

    __slots__ = ("_calls", "_families", "_inner")

    def __init__(self, inner: Store, calls: set[str]) -> None:
        self._inner, self._calls = inner, calls
        self._families: dict[str, _RecordingFamily] = {}

    def __getattr__(self, name: str) -> Any:
        if name in families():
            if name not in self._families:
                family = getattr(self._inner, name)
                self._families[name] = _RecordingFamily(family, name, self._calls)
            return self._families[name]
        return getattr(self._inner, name)


def recording(inner: Store, calls: set[str]) -> Store:
    return cast(Store, RecordingStore(inner, calls))


def unwrapped(store: Store) -> Store:
    """The backend's store under a recording one (for a backend's own checks)."""
    return store._inner if isinstance(store, RecordingStore) else store


__all__ = ["covers", "families", "protocol_verbs", "recording", "unwrapped"]
