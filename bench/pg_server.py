"""The PostgreSQL server the benchmarks run on: a fresh database per measurement, the
server's settings as one line, and the floor (one INSERT + COMMIT per step).

Every measurement gets a database of its own, created empty for it and dropped after
(`DROP DATABASE ... WITH (FORCE)`, naming only the database it created): no other
database on the server is read or touched. The DSN given (default: the local server,
database `test`) is used only to connect and issue CREATE / DROP DATABASE.

    python -m bench.pg_server [--dsn DSN] [--commits N]     the floor on its own
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

try:
    from bench.common import STEPS_PER_TASK, Result, format_table, fs_type
except ModuleNotFoundError:  # run as a script: python bench/pg_server.py
    from common import STEPS_PER_TASK, Result, format_table, fs_type  # type: ignore[no-redef]

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_numbers = itertools.count(1)


@contextmanager
def fresh_database(dsn: str, system: str) -> Iterator[str]:
    """A new, empty database on the server `dsn` names, dropped afterwards; its DSN."""
    name = f"bench_{system}_{os.getpid()}_{next(_numbers)}_{int(time.time())}"
    ident = sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def url(dsn: str) -> str:
    """`dsn` as a postgresql:// URL (what DBOS's configuration takes); a password comes
    from libpq's own sources (PGPASSWORD, ~/.pgpass), never from this URL."""
    info = conninfo_to_dict(dsn)
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info['dbname']}"


def scalar(dsn: str, query: str, params: tuple[Any, ...] = ()) -> Any:
    """The single value `query` returns."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def describe_server(dsn: str) -> str:
    """One line: version and the settings that decide what a commit costs."""
    names = ["server_version", "fsync", "synchronous_commit", "wal_sync_method"]
    names += ["commit_delay", "max_connections", "shared_buffers"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        shown = {name: _show(conn, name) for name in names}
        try:
            row = conn.execute("SHOW data_directory").fetchone()
            data_dir = str(row[0]) if row else ""
        except psycopg.Error:  # not a superuser: the data directory is not shown
            data_dir = ""
    where = f", data on {fs_type(data_dir)}" if data_dir and os.path.isdir(data_dir) else ""
    host = conninfo_to_dict(dsn).get("host") or "localhost"
    return (
        f"postgresql {shown['server_version']} at {host}{where}: fsync={shown['fsync']}, "
        f"synchronous_commit={shown['synchronous_commit']}, "
        f"wal_sync_method={shown['wal_sync_method']}, commit_delay={shown['commit_delay']}, "
        f"shared_buffers={shown['shared_buffers']}, max_connections={shown['max_connections']}"
    )


def _show(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return str(row[0]) if row else "?"


def round_trip_us(dsn: str, n: int = 2000) -> float:
    """Median microseconds of `SELECT 1` on one connection: what a round trip costs."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e6


def postgres_floor(dsn: str, commits: int = 5000, *, warmup: int = 50) -> Result:
    """Commits/s of BEGIN, one tiny INSERT, COMMIT, one at a time on one connection, in a
    fresh database: no durable-task system on this server commits a step faster."""
    # not autocommit: psycopg sends BEGIN before the INSERT
    with fresh_database(dsn, "floor") as db, psycopg.connect(db) as conn:
        conn.execute("CREATE TABLE step (id bigserial PRIMARY KEY, task int, step int, v text)")
        conn.commit()

        def one(i: int) -> None:
            conn.execute(
                "INSERT INTO step (task, step, v) VALUES (%s, %s, %s)",
                (i // STEPS_PER_TASK, i % STEPS_PER_TASK, "ok"),
            )
            conn.commit()

        for i in range(warmup):
            one(-1 - i)
        t0 = time.perf_counter()
        for i in range(commits):
            one(i)
        seconds = time.perf_counter() - t0
        row = conn.execute("SELECT count(*) FROM step WHERE task >= 0").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    rows = row[0] if row else 0
    if rows != commits:
        raise RuntimeError(f"floor wrote {rows} rows, expected {commits}")
    return Result.measured(
        "postgres",
        "floor",
        commits,
        seconds,
        tasks=commits // STEPS_PER_TASK,
        note=(
            f"psycopg, one connection, BEGIN/INSERT/COMMIT per step (commits/s), "
            f"synchronous_commit={sync[0] if sync else '?'}"
        ),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--commits", type=int, default=5000)
    args = parser.parse_args(argv)
    print(describe_server(args.dsn))
    print(f"round trip (SELECT 1): {round_trip_us(args.dsn):.0f} µs median")
    print(format_table([postgres_floor(args.dsn, args.commits)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
