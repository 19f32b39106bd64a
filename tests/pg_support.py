"""PostgreSQL for the tests: the server on 127.0.0.1:5432 (trust auth, database `test`),
a database of this run's own, created at first use and dropped when the run ends, and
one schema in it per store (a store's directory names its schema).

Where no server answers, the PostgreSQL tests skip and say why; under CI=true they fail.
`PFAR_TEST_POSTGRES` names another server (a DSN to its maintenance database).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

SERVER = os.environ.get("PFAR_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
# the run's database, for children a test starts (they inherit the environment)
RUN_DATABASE_ENV = "PFAR_TEST_POSTGRES_RUN_DB"

_state: dict[str, str | None] = {}


def _unreachable() -> str | None:
    """Why no PostgreSQL test can run here (None: the server answers)."""
    if "unreachable" not in _state:
        try:
            with psycopg.connect(SERVER, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _state["unreachable"] = None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            _state["unreachable"] = f"no PostgreSQL server answers at {_redacted()}: {first}"
    return _state["unreachable"]


def _redacted() -> str:
    info = psycopg.conninfo.conninfo_to_dict(SERVER)
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def require_postgres() -> None:
    """Skip the calling test where no server answers (fail under CI=true)."""
    why = _unreachable()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: PostgreSQL tests must run)")
    pytest.skip(why)


def run_database() -> str:
    """The name of this run's own database, created at first use, dropped at exit."""
    name = os.environ.get(RUN_DATABASE_ENV)
    if name:
        return name
    require_postgres()
    name = f"pfar_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        _drop_left_behind(conn)
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ[RUN_DATABASE_ENV] = name
    atexit.register(_drop, name)
    return name


def _drop_left_behind(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Databases of earlier runs on this machine whose process is gone (a run killed
    before it could drop its own)."""
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'pfar\\_test\\_%'"
    ).fetchall()
    for (name,) in rows:
        parts = str(name).split("_")
        if len(parts) == 4 and parts[2].isdigit() and not _alive(int(parts[2])):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop(name: str) -> None:
    try:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error:
        pass  # the server went away first: nothing left to remove


def dsn(schema: str | None = None) -> str:
    """A DSN to this run's database, with `schema` first on the search path."""
    info = psycopg.conninfo.conninfo_to_dict(SERVER)
    info["dbname"] = run_database()
    if schema is not None:
        info["options"] = f"-c search_path={schema}"
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def schema_for(path: Path) -> str:
    """The schema a store under `path` lives in (made if missing): the same for the same
    directory, so reopening a store finds what was committed."""
    name = "s_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:20]
    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
    return name


def store_dsn(path: Path) -> str:
    return dsn(schema_for(path))


def url(schema: str | None = None) -> str:
    """The DSN as a URL (what `pfar init --postgres` is given in the docs' examples)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn(schema))
    options = f"?options={quote(str(info['options']))}" if "options" in info else ""
    user = f"{info['user']}@" if info.get("user") else ""
    return (
        f"postgresql://{user}{info.get('host', 'localhost')}:{info.get('port', 5432)}/"
        f"{info['dbname']}{options}"
    )
