"""The contract's fixtures: the backend (one param per backend), and its store.

Every contract test takes `store` (or `open_store`, to open one again) and so runs once
per backend. The store it is given notes the verbs it calls (verbs.py): a passing test
that claims a verb it never called fails here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pfar.journal.store import Store

from .backends import BACKENDS, Backend
from .verbs import claimed, recording


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    found = BACKENDS[request.param]
    found.available()
    return found


@pytest.fixture
def verbs_called() -> set[str]:
    return set()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def open_store(backend: Backend, verbs_called: set[str]) -> Callable[[Path], Store]:
    """Open the backend's store under a directory (the caller closes it)."""
    return lambda path: recording(backend.open(path), verbs_called)


@pytest.fixture
def store(
    open_store: Callable[[Path], Store], store_path: Path, backend: Backend
) -> Iterator[Store]:
    s = open_store(store_path)
    yield s
    backend.close(s)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # a passing test that claims a verb it never called through its store fails
    result = yield
    claims = claimed(getattr(item, "function", None))
    if claims:
        called: set[str] = getattr(item, "funcargs", {}).get("verbs_called") or set()
        missing = sorted(claims - called)
        if missing:
            raise AssertionError(f"{item.name} claims verbs it never called: {', '.join(missing)}")
    return result
