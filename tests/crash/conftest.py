"""Crash tests marked `both_backends` run twice: with every home's journal on SQLite, and
on PostgreSQL (a schema of the run's own database per home). The PostgreSQL run skips
where no server answers, and fails under CI=true."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .. import support
from ..pg_support import require_postgres


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("both_backends") is not None:
        metafunc.parametrize("journal_backend", ["sqlite", "postgresql"], indirect=True)


# autouse, so that every crash test's fixture closure holds it from the start: a name
# only added to the closure while tests are generated is pruned from it again, and the
# "postgresql" run would then build its homes on SQLite
@pytest.fixture(autouse=True)
def journal_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = getattr(request, "param", "sqlite")
    if name == "postgresql":
        require_postgres()
    support.BACKEND["name"] = name
    try:
        yield name
    finally:
        support.BACKEND["name"] = "sqlite"
