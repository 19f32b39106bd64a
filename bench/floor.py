"""The raw floor: plain sqlite3, WAL + synchronous=FULL, one tiny INSERT + COMMIT at a time.

No durable-task system on SQLite can commit a step faster than this on the same disk: it is
one fsync'd WAL commit per step and nothing else. Run on its own:

    python bench/floor.py [--commits N]      or      python -m bench.floor
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time

try:
    from bench.common import STEPS_PER_TASK, Result, environment, format_table, fresh_dir
except ModuleNotFoundError:  # run as a script: python bench/floor.py
    from common import STEPS_PER_TASK, Result, environment, format_table, fresh_dir  # type: ignore[no-redef]


def sqlite_floor(
    commits: int = 5000, *, warmup: int = 50, base_dir: str | os.PathLike[str] | None = None
) -> Result:
    """Commits/s of one tiny INSERT per transaction, WAL + synchronous=FULL, one at a time."""
    with fresh_dir(base_dir) as d:
        path = d / "floor.sqlite"
        # isolation_level=None: the module issues no implicit BEGIN; we write the transaction.
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous=FULL")
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
            if mode != "wal" or sync != 2:
                raise RuntimeError(f"floor not in WAL/FULL: journal_mode={mode} synchronous={sync}")
            conn.execute(
                "CREATE TABLE step (id INTEGER PRIMARY KEY, task INTEGER, step INTEGER, v TEXT)"
            )

            def one(i: int) -> None:
                conn.execute("BEGIN")
                conn.execute(
                    "INSERT INTO step (task, step, v) VALUES (?, ?, ?)",
                    (i // STEPS_PER_TASK, i % STEPS_PER_TASK, "ok"),
                )
                conn.execute("COMMIT")

            for i in range(warmup):
                one(-1 - i)
            t0 = time.perf_counter()
            for i in range(commits):
                one(i)
            seconds = time.perf_counter() - t0
            (rows,) = conn.execute("SELECT count(*) FROM step WHERE task >= 0").fetchone()
        finally:
            conn.close()
    if rows != commits:
        raise RuntimeError(f"floor wrote {rows} rows, expected {commits}")
    return Result.measured(
        "sqlite3",
        "floor",
        commits,
        seconds,
        tasks=commits // STEPS_PER_TASK,
        note="WAL, synchronous=FULL, BEGIN/INSERT/COMMIT per step (commits/s)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--base-dir", default=None, help="where temp dirs go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    print(environment(args.base_dir))
    print(format_table([sqlite_floor(args.commits, base_dir=args.base_dir)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
