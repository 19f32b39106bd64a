"""pfar with its journal on PostgreSQL, on the workload of bench/pfar_bench.py.

The same tasks (10 `bench.noop` reads, each step durable before the next), the same
kernel and the same runs as the SQLite figures; only the home differs: `pfar init
--postgres` made it, so its journal is a fresh database on the server (created for the
measurement, dropped after) and its local vault keeps secrets and learnings only.
Checked afterwards by reading the rows the kernel left on the server.

Figures: one task at a time, 64 at once (asyncio, one kernel), recovery of 1,000 tasks
killed inside step 5 (spawn of a new kernel process until all Completed), and the
statements each task sends the server (a diagnostic run, not timed).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pfar.journal.postgres import connection as pg_connection
from pfar.kernel.setup_postgres import PostgresInit
from pfar.vault.home import Home

try:
    from bench import pfar_bench
    from bench.common import STEPS_PER_TASK, Result, bounded_gather, fresh_dir
    from bench.pg_server import fresh_database, scalar
except ModuleNotFoundError:  # run as a script from bench/
    import pfar_bench  # type: ignore[no-redef]
    from common import STEPS_PER_TASK, Result, bounded_gather, fresh_dir  # type: ignore[no-redef]
    from pg_server import fresh_database, scalar  # type: ignore[no-redef]

BaseDir = pfar_bench.BaseDir
HOLD_STEP = pfar_bench.HOLD_STEP


@contextmanager
def _pg_home(dsn: str, base_dir: BaseDir) -> Iterator[tuple[Home, str]]:
    """A fresh home whose journal is a fresh database on the server; both go after."""
    with fresh_database(dsn, "pfar") as db, fresh_dir(base_dir) as d:
        yield pfar_bench.make_home(d / "home", postgres=PostgresInit(db)), db


def _count(db: str, where: str) -> int:
    return int(scalar(db, f"SELECT count(*) FROM {where}"))


def _verify(db: str, tasks: int, note: str) -> str:
    done = _count(db, "task_journal WHERE state = 'Completed'")
    steps = _count(db, "task_steps WHERE status = 'completed'")
    if done != tasks or steps != tasks * STEPS_PER_TASK:
        raise RuntimeError(
            f"pfar left {done} Completed tasks / {steps} completed steps on the server, "
            f"expected {tasks} / {tasks * STEPS_PER_TASK}"
        )
    sync = scalar(db, "SHOW synchronous_commit")
    return f"journal on postgresql, synchronous_commit={sync}, {note}, verified {steps} steps"


def pfar_pg_sequential(
    dsn: str, tasks: int = 200, *, warmup: int = 5, base_dir: BaseDir = None
) -> Result:
    """pfar on PostgreSQL: one 10-step task at a time (submit, wait until Completed)."""
    with _pg_home(dsn, base_dir) as (home, db):
        win = asyncio.run(pfar_bench._sequential_run(home, tasks, warmup))
        note = _verify(
            db,
            tasks + warmup,
            f"{win.writes / tasks:.1f} writes/task in {win.commits / tasks:.1f} commits/task",
        )
    return Result.measured(
        "pfar", "sequential", tasks * STEPS_PER_TASK, win.seconds, tasks=tasks, note=note
    )


def pfar_pg_concurrent(
    dsn: str, tasks: int = 640, *, width: int = 64, warmup: int = 8, base_dir: BaseDir = None
) -> Result:
    """pfar on PostgreSQL: `tasks` tasks with `width` in flight, one kernel's event loop."""
    with _pg_home(dsn, base_dir) as (home, db):
        win = asyncio.run(pfar_bench._concurrent_run(home, tasks, width, warmup))
        per_commit = win.writes / win.commits if win.commits else 0.0
        note = _verify(
            db,
            tasks + warmup,
            f"{win.writes / tasks:.1f} writes/task in {win.commits} commits "
            f"({per_commit:.1f} writes/commit)",
        )
    return Result.measured(
        "pfar",
        "concurrent",
        tasks * STEPS_PER_TASK,
        win.seconds,
        tasks=tasks,
        concurrency=width,
        mechanism="asyncio, one kernel",
        note=note,
    )


@dataclass(frozen=True)
class Recovery:
    """Spawn of the new process until ready, and until every task is Completed."""

    system: str
    tasks: int
    steps_left: int
    spawn_to_ready: float | None  # None: the system has no "ready" distinct from launch
    spawn_to_done: float
    note: str = ""


def pfar_pg_recovery(dsn: str, tasks: int = 1000, *, base_dir: BaseDir = None) -> Recovery:
    """SIGKILL a kernel with `tasks` tasks inside step 5, start a new one, time it."""
    with _pg_home(dsn, base_dir) as (home, db):
        first = pfar_bench._Child("hold", home, tasks)
        try:
            first.wait_for("held", timeout=180)
        finally:
            first.kill()
        executing = _count(db, "task_journal WHERE state = 'Executing'")
        durable = _count(db, "task_steps WHERE status = 'completed'")
        if executing != tasks or durable != tasks * HOLD_STEP:
            raise RuntimeError(
                f"after the kill: {executing} Executing tasks, {durable} durable steps; "
                f"expected {tasks} and {tasks * HOLD_STEP}"
            )
        t_spawn = time.monotonic()
        second = pfar_bench._Child("resume", home, tasks)
        try:
            ready = second.wait_for("ready", timeout=120)
            done = second.wait_for("done", timeout=300)
            second.wait_for("stopped", timeout=120)
        finally:
            second.reap()
        steps = _count(db, "task_steps WHERE status = 'completed'")
        completed = done["counts"].get("Completed", 0)
        if completed != tasks or steps != tasks * STEPS_PER_TASK:
            raise RuntimeError(
                f"after recovery: {done['counts']} and {steps} completed steps, expected "
                f"{tasks} Completed and {tasks * STEPS_PER_TASK}"
            )
    return Recovery(
        "pfar",
        tasks,
        tasks * (STEPS_PER_TASK - HOLD_STEP),
        ready["t"] - t_spawn,
        done["t"] - t_spawn,
        f"{ready['resumed']} resumed",
    )


# ------------------------------------------------------------ statements per task


@dataclass(frozen=True)
class Statements:
    """What the journal sent the server for `tasks` tasks, `width` in flight. A read
    awaits its statement's rows (a round trip); the writer's connection is in pipeline
    mode, so its statements go without waiting and a round trip is where it waits for
    their results (a row read, or the batch settling)."""

    tasks: int
    width: int
    per_task: float
    commits_per_task: float
    per_commit: float  # statements per writer transaction (reads outside it included)
    round_trips_per_task: float
    await_us: float  # median microseconds of a round trip, awaited on the event loop
    top: list[tuple[str, float]]  # statement (its first words) and how many per task


def _shape(query: Any) -> str:
    text = query.decode() if isinstance(query, bytes) else str(query)
    return " ".join(text.split())[:60]


@contextmanager
def _counting(seen: Counter[str], waits: list[float]) -> Iterator[None]:
    """Count every statement of the journal's `Tx` (writer and readers), and time each
    round trip."""
    tx = pg_connection.PostgresTx
    names = ("_execute", "_executemany", "_send", "_send_many", "_sync")
    original: dict[str, Callable[..., Any]] = {name: getattr(tx, name) for name in names}

    def counted(name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        waits_here = name in ("_execute", "_executemany", "_sync")

        async def run(self: Any, *args: Any) -> Any:
            if args:
                seen[_shape(args[0])] += 1
            t0 = time.perf_counter()
            try:
                return await inner(self, *args)
            finally:
                if waits_here:
                    waits.append(time.perf_counter() - t0)

        return run

    for name, fn in original.items():
        setattr(tx, name, counted(name, fn))
    try:
        yield
    finally:
        for name, fn in original.items():
            setattr(tx, name, fn)


def pfar_pg_statements(
    dsn: str, tasks: int = 20, *, width: int = 1, base_dir: BaseDir = None
) -> Statements:
    """Count and time every statement the journal sends for `tasks` tasks, `width` in
    flight, in a run of its own (untimed: the wrapper costs a little per statement)."""
    seen: Counter[str] = Counter()
    waits: list[float] = []
    with _pg_home(dsn, base_dir) as (home, _db):

        async def go() -> int:
            kernel = pfar_bench.new_kernel(home)
            await kernel.start()
            try:

                async def one(i: int) -> None:
                    task = await kernel.submit(pfar_bench.TEMPLATE, f"task {i}")
                    await pfar_bench._finished(kernel, task.task_id)

                await bounded_gather(min(width, 8), width, lambda i: one(-1 - i))  # warm-up
                await kernel.wait_idle()
                s0 = await kernel.statistics()
                with _counting(seen, waits):
                    await bounded_gather(tasks, width, one)
                    await kernel.wait_idle()
                s1 = await kernel.statistics()
                return s1.commits - s0.commits
            finally:
                await kernel.shutdown()

        commits = asyncio.run(go())
    total = sum(seen.values())
    return Statements(
        tasks,
        width,
        total / tasks,
        commits / tasks,
        total / commits if commits else 0.0,
        len(waits) / tasks,
        statistics.median(waits) * 1e6 if waits else 0.0,
        [(shape, n / tasks) for shape, n in seen.most_common(12)],
    )


def describe_statements(s: Statements, *, top: bool = True) -> str:
    lines = [
        f"{s.width} in flight: {s.per_task:.1f} statements per task "
        f"({s.per_task / STEPS_PER_TASK:.1f} per step) in {s.commits_per_task:.1f} commits, "
        f"{s.per_commit:.1f} statements per commit; {s.round_trips_per_task:.1f} round trips "
        f"per task, each awaited {s.await_us:.0f} µs (median)"
    ]
    if top:
        lines += [f"  {n:6.1f}  {shape}" for shape, n in s.top]
    return "\n".join(lines)
