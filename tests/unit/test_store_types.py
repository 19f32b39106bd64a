"""The store protocol says what each verb takes and gives: no `Any` in its signatures.

A record with fixed keys is a TypedDict (journal/rows.py), a value kept whole without
known keys is JSON (json_text.JsonValue). Both the text of each annotation and what it
names (an alias such as `JSON = Any`, a TypedDict's fields) are looked at.
"""

from __future__ import annotations

import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator
from typing import Any, ForwardRef, Protocol

from pfar.journal import store, task_protocol

_ANY = re.compile(r"\bAny\b")


# the modules the store protocol is written in (the tasks family has one of its own)
_MODULES = {store.__name__, task_protocol.__name__}


def _protocols() -> list[type]:
    return [
        cls
        for _, cls in inspect.getmembers(store, inspect.isclass)
        if cls.__module__ in _MODULES and getattr(cls, "_is_protocol", False)
    ]


def _members(cls: type) -> Iterator[tuple[str, Callable[..., object]]]:
    for name, value in vars(cls).items():
        if isinstance(value, property) and value.fget is not None:
            yield name, value.fget
        elif inspect.isfunction(value) and not name.startswith("__"):
            yield name, value


def _mentions_any(tp: object, seen: set[int]) -> bool:
    """Whether `tp` is Any or holds it: in its arguments, a forward reference's text, or a
    TypedDict's fields."""
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if tp is Any:
        return True
    if isinstance(tp, str):
        return bool(_ANY.search(tp))
    if isinstance(tp, ForwardRef):
        return bool(_ANY.search(tp.__forward_arg__))
    if typing.is_typeddict(tp):
        return any(_mentions_any(t, seen) for t in typing.get_type_hints(tp).values())
    return any(_mentions_any(a, seen) for a in typing.get_args(tp))


def _offences(cls: type) -> list[str]:
    found = []
    for name, fn in _members(cls):
        texts = {k: str(v) for k, v in fn.__annotations__.items()}
        hints = typing.get_type_hints(fn, vars(sys.modules[cls.__module__]))
        for key in sorted(set(texts) | set(hints)):
            if _ANY.search(texts.get(key, "")) or _mentions_any(hints.get(key), set()):
                found.append(f"{cls.__name__}.{name}: {key}: {texts.get(key)}")
    return found


def test_every_family_of_the_store_is_looked_at() -> None:
    names = {cls.__name__ for cls in _protocols()}
    assert {"TaskStore", "EventStore", "AdapterStore", "LoopStore", "Store"} <= names
    assert all(list(_members(cls)) for cls in _protocols())


def test_no_store_verb_says_any() -> None:
    offences = [line for cls in _protocols() for line in _offences(cls)]
    assert not offences, "explicit Any on the store protocol:\n" + "\n".join(offences)


# -- the check itself finds Any, written out or behind an alias -------------------------

Loose = Any


class _Written(Protocol):
    async def get(self, key: str) -> dict[str, Any]: ...


class _Aliased(Protocol):
    def put(self, key: str, value: list[Loose]) -> None: ...


class _Row(typing.TypedDict):
    key: str
    value: Loose


class _InARow(Protocol):
    def row(self) -> _Row | None: ...


def test_the_check_finds_any_however_it_is_written() -> None:
    for cls in (_Written, _Aliased, _InARow):
        hints = {name: typing.get_type_hints(fn, globals()) for name, fn in _members(cls)}
        assert any(_mentions_any(h, set()) for hs in hints.values() for h in hs.values()), cls
