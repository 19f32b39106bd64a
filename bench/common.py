"""Shared pieces of pfar's benchmarks: the result record, fresh directories, the table.

Every figure in bench/ is a `Result`: how many durable steps ran in how many seconds.
A "durable step" is one unit of work whose outcome is committed to SQLite (with
synchronous=FULL, so fsync'd) before the next step of the same task starts.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

STEPS_PER_TASK = 10


class SkipAnchor(Exception):
    """An anchor cannot run here (its package is missing); the message says why."""


@dataclass(frozen=True)
class Result:
    """One measured figure."""

    name: str  # system measured: "dbos", "langgraph", "sqlite3", "pfar"
    mode: str  # "sequential", "concurrent", "floor"
    steps: int  # durable steps (or commits, for the floor) inside the timed window
    seconds: float  # wall-clock seconds of the timed window
    steps_per_s: float
    tasks: int = 0  # tasks (workflows / graph runs) inside the timed window
    concurrency: int = 1  # tasks in flight at once
    mechanism: str = ""  # how concurrency was obtained: "asyncio.gather", "threads", ""
    note: str = ""  # configuration and what was verified afterwards

    @classmethod
    def measured(
        cls,
        name: str,
        mode: str,
        steps: int,
        seconds: float,
        *,
        tasks: int = 0,
        concurrency: int = 1,
        mechanism: str = "",
        note: str = "",
    ) -> Result:
        rate = steps / seconds if seconds > 0 else float("inf")
        return cls(name, mode, steps, seconds, rate, tasks, concurrency, mechanism, note)


@contextmanager
def fresh_dir(base_dir: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A new, empty temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="pfar-bench-", dir=base_dir) as d:
        yield Path(d)


def fs_type(path: str | os.PathLike[str]) -> str:
    """The filesystem type holding `path` (from /proc/mounts), or "?"."""
    target = os.path.realpath(path)
    best_mount, best_type = "", "?"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best_type
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount, kind = parts[1], parts[2]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best_mount):
            best_mount, best_type = mount, kind
    return best_type


def scalar(db_path: Path, sql: str) -> int:
    """The single integer `sql` returns, read from a SQLite file after its writer stopped."""
    conn = sqlite3.connect(db_path)
    try:
        (n,) = conn.execute(sql).fetchone()
        return int(n)
    finally:
        conn.close()


def journal_mode(db_path: Path) -> str:
    conn = sqlite3.connect(db_path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def package_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment(base_dir: str | os.PathLike[str] | None = None) -> str:
    """One line saying where the figures were taken."""
    tmp = base_dir or tempfile.gettempdir()
    return (
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} cpu, temp dirs under {tmp} ({fs_type(tmp)})"
    )


def format_table(rows: Iterable[Result | tuple[str, str, str]]) -> str:
    """A plain text table; a (name, mode, text) tuple is a row that has no figures."""
    header = f"{'system':<10} {'mode':<12} {'in flight':>9} {'tasks':>6} {'steps':>7} "
    header += f"{'seconds':>8} {'steps/s':>9}  how"
    out = [header, "-" * len(header)]
    for row in rows:
        if isinstance(row, Result):
            how = ", ".join(x for x in (row.mechanism, row.note) if x)
            out.append(
                f"{row.name:<10} {row.mode:<12} {row.concurrency:>9} {row.tasks:>6} "
                f"{row.steps:>7} {row.seconds:>8.2f} {row.steps_per_s:>9.1f}  {how}"
            )
        else:
            name, mode, text = row
            out.append(f"{name:<10} {mode:<12} {text}")
    return "\n".join(out)


T = TypeVar("T")


async def bounded_gather(n: int, width: int, make: Callable[[int], Awaitable[T]]) -> list[T]:
    """Run make(0..n-1) with at most `width` in flight; results in order.

    `width` workers each take the next number when their last call ends: a semaphore
    with all `n` calls waiting on it would cost the harness O(n) per acquire
    (asyncio's Semaphore.locked looks at every waiter), measured as the system's time.
    """
    results: list[Any] = [None] * n
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:
            results[i] = await make(i)

    await asyncio.gather(*(worker() for _ in range(min(width, n))))
    return results
