"""DBOS on PostgreSQL, on pfar's benchmark workload, to print beside pfar on PostgreSQL.

Launched as bench/anchors.py launches it on SQLite, with `system_database_url` a
postgresql:// URL naming a fresh database of its own on the same server (created empty
for the measurement, dropped after; DBOS creates its `dbos` schema in it at launch).
The workflow is the same: 10 `@DBOS.step()`s, each step's output one INSERT + COMMIT
in `dbos.operation_outputs` before the next step runs; checked afterwards by counting
the rows DBOS left.

Recovery: a process launches DBOS and starts `tasks` async workflows; each runs steps
0-4 and holds inside step 5; the process is SIGKILLed. A new process launches DBOS
(which finds the pending workflows of its executor and runs them again, replaying steps
0-4 from their recorded outputs) and looks every 10 ms until all are SUCCESS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

try:
    from bench import anchors
    from bench.common import STEPS_PER_TASK, Result, bounded_gather
    from bench.pfar_bench import ChildProcess
    from bench.pg_pfar import HOLD_STEP, Recovery
    from bench.pg_server import fresh_database, scalar, url
except ModuleNotFoundError:  # run as a script: python bench/pg_dbos.py --child ...
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import anchors  # type: ignore[no-redef]
    from common import STEPS_PER_TASK, Result, bounded_gather  # type: ignore[no-redef]
    from pfar_bench import ChildProcess  # type: ignore[no-redef]
    from pg_pfar import HOLD_STEP, Recovery  # type: ignore[no-redef]
    from pg_server import fresh_database, scalar, url  # type: ignore[no-redef]

APP_VERSION = "pfar-bench"  # the same in the killed process and the one that recovers


@contextmanager
def _launched(db: str) -> Iterator[None]:
    """DBOS on the PostgreSQL database `db`, launched, destroyed after."""
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {
        "name": "pfar_bench",
        "system_database_url": url(db),
        "application_version": APP_VERSION,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    try:
        DBOS.launch()
        yield
    finally:
        DBOS.destroy()


def _verify(db: str, tasks: int) -> str:
    steps = int(scalar(db, "SELECT count(*) FROM dbos.operation_outputs"))
    done = int(scalar(db, "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"))
    if steps != tasks * STEPS_PER_TASK or done != tasks:
        raise RuntimeError(
            f"DBOS recorded {steps} step outputs / {done} workflows, "
            f"expected {tasks * STEPS_PER_TASK} / {tasks}"
        )
    sync = scalar(db, "SHOW synchronous_commit")
    return f"system database on postgresql, synchronous_commit={sync}, verified {steps} steps"


def dbos_pg_sequential(dsn: str, tasks: int = 200, *, warmup: int = 3) -> Result:
    """DBOS on PostgreSQL: one workflow of 10 steps at a time."""
    anchors._require("dbos")
    fns = anchors._dbos_functions()
    with fresh_database(dsn, "dbos") as db:
        with _launched(db):
            base = anchors.WARMUP_BASE
            anchors._check_outputs([fns.task(i) for i in range(base, base + warmup)], base)
            t0 = time.perf_counter()
            outputs = [fns.task(i) for i in range(tasks)]
            seconds = time.perf_counter() - t0
        anchors._check_outputs(outputs, 0)
        note = _verify(db, tasks + warmup)
    return Result.measured(
        "dbos", "sequential", tasks * STEPS_PER_TASK, seconds, tasks=tasks, note=note
    )


def dbos_pg_concurrent(dsn: str, tasks: int = 640, *, width: int = 64, warmup: int = 3) -> Result:
    """DBOS on PostgreSQL: `tasks` async workflows, `width` in flight (asyncio.gather)."""
    anchors._require("dbos")
    fns = anchors._dbos_functions()
    with fresh_database(dsn, "dbos") as db:
        with _launched(db):

            async def run() -> tuple[list[Any], float]:
                base = anchors.WARMUP_BASE
                await bounded_gather(warmup, width, lambda i: fns.task_async(base + i))
                t0 = time.perf_counter()
                out = await bounded_gather(tasks, width, fns.task_async)
                return out, time.perf_counter() - t0

            outputs, seconds = asyncio.run(run())
        anchors._check_outputs(outputs, 0)
        note = _verify(db, tasks + warmup)
    return Result.measured(
        "dbos",
        "concurrent",
        tasks * STEPS_PER_TASK,
        seconds,
        tasks=tasks,
        concurrency=width,
        mechanism="asyncio.gather",
        note=note,
    )


# ---------------------------------------------------------------------- recovery


def dbos_pg_recovery(dsn: str, tasks: int = 1000, *, err_dir: Path) -> Recovery:
    """SIGKILL a DBOS process with `tasks` workflows inside step 5, relaunch, time it."""
    anchors._require("dbos")
    with fresh_database(dsn, "dbos") as db:
        first = _spawn("hold", db, tasks, err_dir)
        try:
            first.wait_for("held", timeout=300)
        finally:
            first.kill()
        pending = int(
            scalar(db, "SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING'")
        )
        durable = int(scalar(db, "SELECT count(*) FROM dbos.operation_outputs"))
        if pending != tasks or durable != tasks * HOLD_STEP:
            raise RuntimeError(
                f"after the kill: {pending} PENDING workflows, {durable} step outputs; "
                f"expected {tasks} and {tasks * HOLD_STEP}"
            )
        t_spawn = time.monotonic()
        second = _spawn("resume", db, tasks, err_dir)
        try:
            ready = second.wait_for("ready", timeout=120)
            done = second.wait_for("done", timeout=600)
        finally:
            second.kill()
        steps = int(scalar(db, "SELECT count(*) FROM dbos.operation_outputs"))
        if steps != tasks * STEPS_PER_TASK:
            raise RuntimeError(f"after recovery: {steps} step outputs, expected "
                               f"{tasks * STEPS_PER_TASK}")  # fmt: skip
    return Recovery(
        "dbos",
        tasks,
        tasks * (STEPS_PER_TASK - HOLD_STEP),
        ready["t"] - t_spawn,
        done["t"] - t_spawn,
        "launch returned at 'ready'; recovery runs after it",
    )


def _spawn(mode: str, db: str, tasks: int, err_dir: Path) -> ChildProcess:
    argv = ["--child", mode, db, str(tasks)]
    return ChildProcess(Path(__file__).resolve(), argv, err_dir / f"dbos-child-{mode}.err")


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


_held = 0
_hold = False


def _recovery_workflow(tasks: int) -> Callable[[int], Coroutine[Any, Any, int]]:
    from dbos import DBOS

    @DBOS.step(name="pfar_bench_recovery_step")
    async def step(x: int, i: int) -> int:
        global _held  # noqa: PLW0603 - one counter for the whole process
        if _hold and i == HOLD_STEP:
            _held += 1
            if _held == tasks:
                _emit("held", tasks=tasks)
            await asyncio.Event().wait()  # until the process is killed
        return x + 1

    @DBOS.workflow(name="pfar_bench_recovery_task")
    async def task(x: int) -> int:
        for i in range(STEPS_PER_TASK):
            x = await step(x, i)
        return x

    return task


def child_main(mode: str, db: str, tasks: int) -> int:
    global _hold  # noqa: PLW0603
    from dbos import DBOS

    _hold = mode == "hold"
    workflow = _recovery_workflow(tasks)
    if mode == "hold":
        with _launched(db):

            async def hold() -> None:
                await asyncio.gather(
                    *(DBOS.start_workflow_async(workflow, i) for i in range(tasks))
                )
                await asyncio.Event().wait()

            asyncio.run(hold())
        return 0
    with _launched(db):  # launch finds the pending workflows and recovers them
        _emit("ready")
        with psycopg.connect(db, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"
                ).fetchone()
                if row is not None and row[0] >= tasks:
                    break
                time.sleep(0.01)
        _emit("done")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=3, metavar=("MODE", "DB", "TASKS"), required=True)
    args = parser.parse_args()
    mode, db, n = args.child
    raise SystemExit(child_main(mode, db, int(n)))
