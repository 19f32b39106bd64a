"""Anchors: DBOS and LangGraph on pfar's benchmark workload, to print beside pfar's figures.

Workload: tasks of 10 trivial steps, each step durable (committed to SQLite) before the
next step of the same task starts. Every measurement runs in a fresh temp directory with
its own SQLite file, after a few untimed warm-up tasks, and is checked afterwards by
reading the rows the system left in its database.

- DBOS (`dbos`): a `@DBOS.workflow()` calling 10 `@DBOS.step()`s; the system database is
  `sqlite:///<tmpdir>/dbos.sqlite`, put in WAL mode before launch (DBOS itself leaves
  SQLite's default rollback journal; WAL is persistent in the file). synchronous is
  SQLite's default, FULL. Each step's output is one INSERT + COMMIT in operation_outputs.
- LangGraph (`langgraph` + `langgraph-checkpoint-sqlite`): a StateGraph of 10 nodes in a
  chain, checkpointer SqliteSaver / AsyncSqliteSaver (they set WAL themselves),
  synchronous=FULL set explicitly, and `durability="sync"` passed to invoke/ainvoke so
  each super-step's checkpoint is committed before the next node runs.
- The raw sqlite3 floor is in bench/floor.py and is printed in the same table.

Modes: "sequential" runs one task at a time; "concurrent" keeps `width` (64) tasks in
flight, through asyncio.gather (async workflows / ainvoke) or a thread pool; the output
says which. Run: `python bench/anchors.py` or `python -m bench.anchors` (see --help).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypedDict

try:
    from bench.common import (
        STEPS_PER_TASK,
        Result,
        SkipAnchor,
        bounded_gather,
        environment,
        format_table,
        fresh_dir,
        journal_mode,
        package_version,
        scalar,
    )
    from bench.floor import sqlite_floor
except ModuleNotFoundError:  # run as a script: python bench/anchors.py
    from common import (  # type: ignore[no-redef]
        STEPS_PER_TASK,
        Result,
        SkipAnchor,
        bounded_gather,
        environment,
        format_table,
        fresh_dir,
        journal_mode,
        package_version,
        scalar,
    )
    from floor import sqlite_floor  # type: ignore[no-redef]

BaseDir = str | os.PathLike[str] | None
MECHANISMS = ("async", "threads")
WARMUP_BASE = -1000  # warm-up tasks take inputs -1000.., timed tasks 0..n-1


def _require(*modules: str) -> None:
    """Raise SkipAnchor naming the first module that is not installed."""
    for mod in modules:
        try:
            found = find_spec(mod) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            raise SkipAnchor(
                f"package providing '{mod}' is not installed (pip install 'pfar[bench]')"
            )


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, not {mechanism!r}")


def _mechanism_label(mechanism: str) -> str:
    return "asyncio.gather" if mechanism == "async" else "threads"


def _check_outputs(outputs: list[Any], first: int) -> None:
    for i, out in enumerate(outputs, start=first):
        if out != i + STEPS_PER_TASK:
            raise RuntimeError(f"task {i} returned {out!r}, expected {i + STEPS_PER_TASK}")


# --------------------------------------------------------------------------- DBOS


@dataclass(frozen=True)
class _DbosFns:
    task: Callable[[int], int]
    task_async: Callable[[int], Awaitable[int]]


_dbos_fns: _DbosFns | None = None


def _dbos_functions() -> _DbosFns:
    """Register the benchmark workflows with DBOS once per process (before any launch)."""
    global _dbos_fns  # noqa: PLW0603 - DBOS's registry is process-global too
    if _dbos_fns is not None:
        return _dbos_fns
    from dbos import DBOS

    @DBOS.step(name="pfar_bench_step")
    def bench_step(x: int) -> int:
        return x + 1

    @DBOS.workflow(name="pfar_bench_task")
    def bench_task(x: int) -> int:
        for _ in range(STEPS_PER_TASK):
            x = bench_step(x)
        return x

    @DBOS.step(name="pfar_bench_step_async")
    async def bench_step_async(x: int) -> int:
        return x + 1

    @DBOS.workflow(name="pfar_bench_task_async")
    async def bench_task_async(x: int) -> int:
        for _ in range(STEPS_PER_TASK):
            x = await bench_step_async(x)
        return x

    _dbos_fns = _DbosFns(task=bench_task, task_async=bench_task_async)
    return _dbos_fns


def _set_wal(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


@contextmanager
def _dbos_launched(db_path: Path, *, wal: bool) -> Iterator[_DbosFns]:
    """DBOS configured on a SQLite system database at db_path, launched, destroyed after."""
    from dbos import DBOS, DBOSConfig

    fns = _dbos_functions()
    if wal:
        _set_wal(db_path)
    config: DBOSConfig = {
        "name": "pfar_bench",
        "system_database_url": f"sqlite:///{db_path}",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    try:
        DBOS.launch()
        yield fns
    finally:
        DBOS.destroy()


def _dbos_note(db_path: Path, expected_steps: int, expected_tasks: int) -> str:
    steps = scalar(db_path, "SELECT count(*) FROM operation_outputs")
    tasks = scalar(db_path, "SELECT count(*) FROM workflow_status WHERE status = 'SUCCESS'")
    if steps != expected_steps or tasks != expected_tasks:
        raise RuntimeError(
            f"DBOS recorded {steps} step outputs / {tasks} workflows, "
            f"expected {expected_steps} / {expected_tasks}"
        )
    # DBOS sets no synchronous pragma, so its connections get this SQLite build's default.
    sync = scalar(db_path, "PRAGMA synchronous")
    sync_name = "FULL" if sync == 2 else f"{sync} (not FULL)"
    journal = journal_mode(db_path)
    return f"journal={journal}, synchronous={sync_name} (default), verified {steps} steps"


def dbos_sequential(
    tasks: int = 200, *, warmup: int = 3, wal: bool = True, base_dir: BaseDir = None
) -> Result:
    """DBOS: one workflow of 10 steps at a time, `tasks` workflows."""
    _require("dbos")
    with fresh_dir(base_dir) as d:
        db_path = d / "dbos.sqlite"
        with _dbos_launched(db_path, wal=wal) as fns:
            _check_outputs(
                [fns.task(i) for i in range(WARMUP_BASE, WARMUP_BASE + warmup)], WARMUP_BASE
            )
            t0 = time.perf_counter()
            outputs = [fns.task(i) for i in range(tasks)]
            seconds = time.perf_counter() - t0
        _check_outputs(outputs, 0)
        total = tasks + warmup
        note = _dbos_note(db_path, total * STEPS_PER_TASK, total)
    return Result.measured(
        "dbos", "sequential", tasks * STEPS_PER_TASK, seconds, tasks=tasks, note=note
    )


def dbos_concurrent(
    tasks: int = 640,
    *,
    width: int = 64,
    mechanism: str = "async",
    warmup: int = 3,
    wal: bool = True,
    base_dir: BaseDir = None,
) -> Result:
    """DBOS: `tasks` workflows with `width` in flight (async workflows + gather, or threads)."""
    _require("dbos")
    _check_mechanism(mechanism)
    with fresh_dir(base_dir) as d:
        db_path = d / "dbos.sqlite"
        with _dbos_launched(db_path, wal=wal) as fns:
            if mechanism == "async":

                async def run() -> tuple[list[Any], float]:
                    await bounded_gather(warmup, width, lambda i: fns.task_async(WARMUP_BASE + i))
                    t0 = time.perf_counter()
                    out = await bounded_gather(tasks, width, fns.task_async)
                    return out, time.perf_counter() - t0

                outputs, seconds = asyncio.run(run())
            else:
                with ThreadPoolExecutor(max_workers=width) as pool:
                    list(pool.map(fns.task, range(WARMUP_BASE, WARMUP_BASE + warmup)))
                    t0 = time.perf_counter()
                    outputs = list(pool.map(fns.task, range(tasks)))
                    seconds = time.perf_counter() - t0
        _check_outputs(outputs, 0)
        total = tasks + warmup
        note = _dbos_note(db_path, total * STEPS_PER_TASK, total)
    return Result.measured(
        "dbos",
        "concurrent",
        tasks * STEPS_PER_TASK,
        seconds,
        tasks=tasks,
        concurrency=width,
        mechanism=_mechanism_label(mechanism),
        note=note,
    )


# ---------------------------------------------------------------------- LangGraph


class _ChainState(TypedDict):
    n: int


def _node(state: _ChainState) -> dict[str, int]:
    return {"n": state["n"] + 1}


async def _anode(state: _ChainState) -> dict[str, int]:
    return {"n": state["n"] + 1}


def _chain_builder(node: Callable[..., Any]) -> Any:
    """A StateGraph of STEPS_PER_TASK nodes in a chain, not yet compiled."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(_ChainState)
    prev = START
    for i in range(STEPS_PER_TASK):
        name = f"step_{i}"
        builder.add_node(name, node)
        builder.add_edge(prev, name)
        prev = name
    builder.add_edge(prev, END)
    return builder


def _thread(i: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"task-{i}"}}


def _langgraph_note(db_path: Path, tasks_total: int) -> str:
    checkpoints = scalar(db_path, "SELECT count(*) FROM checkpoints")
    writes = scalar(db_path, "SELECT count(*) FROM writes")
    threads = scalar(db_path, "SELECT count(DISTINCT thread_id) FROM checkpoints")
    if threads != tasks_total or checkpoints < tasks_total * STEPS_PER_TASK:
        raise RuntimeError(
            f"LangGraph left {checkpoints} checkpoints in {threads} threads, "
            f"expected >= {tasks_total * STEPS_PER_TASK} in {tasks_total}"
        )
    return (
        f"durability=sync, journal={journal_mode(db_path)}, synchronous=FULL, "
        f"per task {checkpoints / tasks_total:g} checkpoints + {writes / tasks_total:g} writes"
    )


def langgraph_sequential(tasks: int = 200, *, warmup: int = 3, base_dir: BaseDir = None) -> Result:
    """LangGraph + SqliteSaver, durability="sync": one 10-node run at a time."""
    _require("langgraph.graph", "langgraph.checkpoint.sqlite")
    from langgraph.checkpoint.sqlite import SqliteSaver

    builder = _chain_builder(_node)
    with fresh_dir(base_dir) as d:
        db_path = d / "langgraph.sqlite"
        # check_same_thread=False: the graph commits checkpoints from its executor thread;
        # SqliteSaver serialises use of the connection with its own lock.
        conn = sqlite3.connect(db_path, check_same_thread=False)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            graph = builder.compile(checkpointer=SqliteSaver(conn))

            def run(i: int) -> int:
                return int(graph.invoke({"n": i}, _thread(i), durability="sync")["n"])

            _check_outputs([run(i) for i in range(WARMUP_BASE, WARMUP_BASE + warmup)], WARMUP_BASE)
            t0 = time.perf_counter()
            outputs = [run(i) for i in range(tasks)]
            seconds = time.perf_counter() - t0
        finally:
            conn.close()
        _check_outputs(outputs, 0)
        note = _langgraph_note(db_path, tasks + warmup)
    return Result.measured(
        "langgraph", "sequential", tasks * STEPS_PER_TASK, seconds, tasks=tasks, note=note
    )


def langgraph_concurrent(
    tasks: int = 640,
    *,
    width: int = 64,
    mechanism: str = "async",
    warmup: int = 3,
    base_dir: BaseDir = None,
) -> Result:
    """LangGraph, durability="sync", `width` runs in flight.

    async: AsyncSqliteSaver (one aiosqlite connection) + ainvoke under asyncio.gather.
    threads: SqliteSaver (one sqlite3 connection behind its lock) + invoke on a thread pool.
    """
    _require("langgraph.graph", "langgraph.checkpoint.sqlite")
    _check_mechanism(mechanism)
    with fresh_dir(base_dir) as d:
        db_path = d / "langgraph.sqlite"
        if mechanism == "async":
            _require("aiosqlite")
            outputs, seconds = asyncio.run(_langgraph_async(db_path, tasks, width, warmup))
        else:
            outputs, seconds = _langgraph_threads(db_path, tasks, width, warmup)
        _check_outputs(outputs, 0)
        note = _langgraph_note(db_path, tasks + warmup)
    return Result.measured(
        "langgraph",
        "concurrent",
        tasks * STEPS_PER_TASK,
        seconds,
        tasks=tasks,
        concurrency=width,
        mechanism=_mechanism_label(mechanism),
        note=note,
    )


async def _langgraph_async(
    db_path: Path, tasks: int, width: int, warmup: int
) -> tuple[list[int], float]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    builder = _chain_builder(_anode)
    async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
        await saver.conn.execute("PRAGMA synchronous=FULL")
        graph = builder.compile(checkpointer=saver)

        async def run(i: int) -> int:
            out = await graph.ainvoke({"n": i}, _thread(i), durability="sync")
            return int(out["n"])

        warm = await bounded_gather(warmup, width, lambda i: run(WARMUP_BASE + i))
        _check_outputs(warm, WARMUP_BASE)
        t0 = time.perf_counter()
        outputs = await bounded_gather(tasks, width, run)
        return outputs, time.perf_counter() - t0


def _langgraph_threads(
    db_path: Path, tasks: int, width: int, warmup: int
) -> tuple[list[int], float]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    builder = _chain_builder(_node)
    conn = sqlite3.connect(db_path, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        graph = builder.compile(checkpointer=SqliteSaver(conn))

        def run(i: int) -> int:
            return int(graph.invoke({"n": i}, _thread(i), durability="sync")["n"])

        with ThreadPoolExecutor(max_workers=width) as pool:
            list(pool.map(run, range(WARMUP_BASE, WARMUP_BASE + warmup)))
            t0 = time.perf_counter()
            outputs = list(pool.map(run, range(tasks)))
            seconds = time.perf_counter() - t0
    finally:
        conn.close()
    return outputs, seconds


# ---------------------------------------------------------------------------- main


def _plan(args: argparse.Namespace) -> list[tuple[str, str, Callable[[], Result]]]:
    base = args.base_dir
    mechanisms = list(MECHANISMS) if args.mechanism == "both" else [args.mechanism]
    plan: list[tuple[str, str, Callable[[], Result]]] = []
    if "floor" in args.only:
        plan.append(("sqlite3", "floor", lambda: sqlite_floor(args.floor_commits, base_dir=base)))
    if "dbos" in args.only:
        plan.append(("dbos", "sequential", lambda: dbos_sequential(args.seq, base_dir=base)))
        for mech in mechanisms:
            plan.append(
                (
                    "dbos",
                    "concurrent",
                    lambda m=mech: dbos_concurrent(
                        args.conc, width=args.width, mechanism=m, base_dir=base
                    ),
                )
            )
    if "langgraph" in args.only:
        plan.append(
            ("langgraph", "sequential", lambda: langgraph_sequential(args.seq, base_dir=base))
        )
        for mech in mechanisms:
            plan.append(
                (
                    "langgraph",
                    "concurrent",
                    lambda m=mech: langgraph_concurrent(
                        args.conc, width=args.width, mechanism=m, base_dir=base
                    ),
                )
            )
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="DBOS and LangGraph anchors (and the sqlite3 floor) on 10-step tasks."
    )
    parser.add_argument("--seq", type=int, default=200, help="tasks, sequential (200)")
    parser.add_argument("--conc", type=int, default=640, help="tasks, concurrent (640)")
    parser.add_argument("--width", type=int, default=64, help="tasks in flight (64)")
    parser.add_argument("--floor-commits", type=int, default=5000)
    parser.add_argument(
        "--mechanism", choices=[*MECHANISMS, "both"], default="async", help="concurrency"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=["floor", "dbos", "langgraph"],
        help="run only these (repeatable); default all",
    )
    parser.add_argument("--base-dir", default=None, help="where temp dirs go (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="also print results as JSON lines")
    args = parser.parse_args(argv)
    args.only = args.only or ["floor", "dbos", "langgraph"]

    print(environment(args.base_dir))
    print(
        "versions: "
        + ", ".join(
            f"{dist} {package_version(dist)}"
            for dist in ("dbos", "langgraph", "langgraph-checkpoint-sqlite", "aiosqlite")
        )
    )
    rows: list[Result | tuple[str, str, str]] = []
    results: list[Result] = []
    caught: list[str] = []
    failed = False
    started = time.perf_counter()
    for name, mode, run in _plan(args):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                result = run()
            except SkipAnchor as skip:
                rows.append((name, mode, f"skipped: {skip}"))
                continue
            except Exception as exc:
                failed = True
                rows.append((name, mode, f"FAILED: {exc!r}"))
                continue
            finally:
                caught.extend(f"{name} {mode}: {w.category.__name__}: {w.message}" for w in seen)
        rows.append(result)
        results.append(result)
        how = f" ({result.mechanism})" if result.mechanism else ""
        print(f"  done {name} {mode}{how}: {result.steps_per_s:.1f} steps/s", flush=True)
    print()
    print(format_table(rows))
    print(f"\ntotal wall time {time.perf_counter() - started:.1f}s")
    for line in dict.fromkeys(caught):
        print(f"warning: {line}")
    if args.json:
        for r in results:
            print(json.dumps(asdict(r)))
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
