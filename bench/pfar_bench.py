"""pfar on the benchmark workload, measured through its Python API, plus its own targets.

Workload (the same as bench/anchors.py): tasks of 10 trivial steps, each step durable
before the next starts. Here a step is the Read tool `bench.noop` (returns a small dict);
for a Read step pfar commits exactly one journal write, `step_finished` (the step row and
the task's progress), before the next step runs. A pfar task also journals its own phases
(created, extracted, planned, synthesizing, completed; the kernel may fold some of them
into one commit) and, with the owner as output sink (the default), appends its result to
the fsync'd owner.log and marks it delivered: the note under each figure says how many
journal writes and commits a task cost. Journal: SQLite WAL, synchronous=FULL (pfar's
default config) behind pfar's group commit.

Figures, each checked against a target:

1. sequential: one task at a time (submit, wait until Completed, next)   >= 4,000 steps/s
2. concurrent: 64 tasks in flight, asyncio inside one kernel              >= 20,000 steps/s
3. recovery: 1,000 tasks SIGKILLed half-way (every task has steps 0-4 durable and is
   inside step 5 when the kernel is killed), then a new kernel process: time from spawn
   until the kernel is ready and until all 1,000 are Completed              < 1 s
4. plan_recovery() over 10,000 unfinished + 1,000,000 finished tasks       < 1 s
5. peak RSS (VmHWM) of a kernel process with 1,000 tasks parked on approvals < 100 MB

Run: `python bench/pfar_bench.py [--quick]` or `python -m bench.pfar_bench` (see --help).
bench/run.py prints these beside DBOS, LangGraph and the raw sqlite floor.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

try:
    from bench.common import (
        STEPS_PER_TASK,
        Result,
        bounded_gather,
        environment,
        format_table,
        fresh_dir,
    )
except ModuleNotFoundError:  # run as a script: python bench/pfar_bench.py
    from common import (  # type: ignore[no-redef]
        STEPS_PER_TASK,
        Result,
        bounded_gather,
        environment,
        format_table,
        fresh_dir,
    )

from pfar import init_home
from pfar.config import Config
from pfar.journal import TaskRecord, TaskState, tasks_sql
from pfar.journal.payloads import EMPTY, Executing, Payload
from pfar.journal.records import Idempotency, Semantics, rfc3339
from pfar.journal.sqlite import open_journal
from pfar.kernel.kernel import Kernel
from pfar.kernel.setup_postgres import PostgresInit
from pfar.llm.script_file import Script, ScriptHandler
from pfar.llm.scripted import ScriptedChatModel
from pfar.recovery import RecoveryAction, plan_recovery
from pfar.tools.base import ToolContext
from pfar.tools.registry import ToolRegistry
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.sqlite import connect

BaseDir = str | os.PathLike[str] | None

TEMPLATE = "bench"  # 10 bench.noop reads
APPROVAL_TEMPLATE = "bench_approval"  # 5 reads, a write that needs approval, 4 reads
HOLD_STEP = 5  # the recovery benchmark's kill point: inside step 5 (0-based), steps 0-4 durable
WIDTH = 64
RUN_TIMEOUT_S = 300.0  # a hung run fails loudly instead of stalling bench/run.py

# targets from the brief
TARGET_SEQUENTIAL = 4_000.0  # steps/s
TARGET_CONCURRENT = 20_000.0  # steps/s
TARGET_RECOVERY_S = 1.0
TARGET_PLAN_S = 1.0
TARGET_RSS_MB = 100.0


# --------------------------------------------------------------------------- tools


class NoopRead:
    """`bench.noop`: a Read step returning a small dict. Can hold forever at one step."""

    name: ClassVar[str] = "bench.noop"
    description: ClassVar[str] = "Benchmark step: returns a small dict."
    args_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    result_label: ClassVar[str] = "Extracted"

    def __init__(
        self, hold_step: int | None = None, on_hold: Callable[[int], None] | None = None
    ) -> None:
        self.hold_step = hold_step
        self.on_hold = on_hold
        self.held = 0

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if ctx.step == self.hold_step:
            self.held += 1
            if self.on_hold is not None:
                self.on_hold(self.held)
            await asyncio.Event().wait()  # until the process is killed
        return {"ok": True, "step": ctx.step}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


class NoopWrite:
    """`bench.noop_write`: a Write with an idempotency key; the approval template gates it."""

    name: ClassVar[str] = "bench.noop_write"
    description: ClassVar[str] = "Benchmark write: does nothing, needs the owner's approval."
    args_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    result_label: ClassVar[str] = "Extracted"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.key

    def validate(self, args: dict[str, Any]) -> None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"ok": True, "key": ctx.idempotency_key}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


def bench_tools(
    hold_step: int | None = None, on_hold: Callable[[int], None] | None = None
) -> ToolRegistry:
    return ToolRegistry([NoopRead(hold_step, on_hold), NoopWrite()])


def _step(tool: str, i: int) -> dict[str, Any]:
    return {"tool": tool, "args": {"i": i}, "description": f"step {i}"}


def bench_model() -> ScriptedChatModel:
    """The scripted model: a fixed plan per template; extract and synthesize use defaults."""
    approval_steps = [
        _step("bench.noop_write" if i == HOLD_STEP else "bench.noop", i)
        for i in range(STEPS_PER_TASK)
    ]
    script = Script.model_validate(
        {
            "responses": [
                {
                    "phase": "plan",
                    "template": TEMPLATE,
                    "json": {"steps": [_step("bench.noop", i) for i in range(STEPS_PER_TASK)]},
                },
                {"phase": "plan", "template": APPROVAL_TEMPLATE, "json": {"steps": approval_steps}},
            ]
        }
    )
    return ScriptedChatModel(ScriptHandler(script, "<bench>"))


def make_home(
    root: Path,
    *,
    sinks: tuple[str, ...] = ("owner",),
    encrypted: bool = True,
    postgres: PostgresInit | None = None,
) -> Home:
    """A fresh home (pfar init, default config: WAL, synchronous=FULL) with the templates:
    encrypted as `pfar init` makes it (its key in a file beside the home), or plain; its
    journal on the PostgreSQL server `postgres` names, when given."""
    home = Home(root)
    if encrypted:
        init_home(
            home,
            examples=False,
            encryption="file",
            key_file=root.parent / f"{root.name}.key",
            postgres=postgres,
        )
    else:
        init_home(home, examples=False, encryption="none", postgres=postgres)
    sink_list = ", ".join(f'"{s}"' for s in sinks)
    (home.templates_dir / f"{TEMPLATE}.toml").write_text(
        f'id = "{TEMPLATE}"\n'
        'description = "bench: 10 trivial reads"\n'
        'allowed_tools = ["bench.noop"]\n'
        f"output_sinks = [{sink_list}]\n"
    )
    (home.templates_dir / f"{APPROVAL_TEMPLATE}.toml").write_text(
        f'id = "{APPROVAL_TEMPLATE}"\n'
        'description = "bench: reads, then a write the owner approves"\n'
        'allowed_tools = ["bench.noop", "bench.noop_write"]\n'
        f"output_sinks = [{sink_list}]\n"
        "[approval]\n"
        'require = ["bench.noop_write"]\n'
    )
    return home


def new_kernel(home: Home, **tool_kw: Any) -> Kernel:
    return Kernel(home, kernel_config(home), tools=bench_tools(**tool_kw), model=bench_model())


def kernel_config(home: Home) -> Config:
    """pfar's defaults, for a home whose journal is its sessions.db; a home whose journal
    is on a PostgreSQL server reads its config.toml, which names the server."""
    if home.sessions_db.exists():
        return Config()
    return Config.load(home.config)


def journal_scalar(home: Home, sql: str) -> int:
    """The single integer `sql` returns from the home's journal (with its key, if any)."""
    conn = connect(home.sessions_db, key=keys.unlock(home), readonly=True)
    try:
        (n,) = conn.execute(sql).fetchone()
        return int(n)
    finally:
        conn.close()


def _cipher(home: Home) -> str:
    return "SQLCipher 4 (AES-256)" if keys.read_unlock(home.vault_dir) else "plain"


def _verify(home: Home, tasks: int, *, note: str) -> str:
    """Check the journal after the kernel stopped: every task Completed, every step durable."""
    done = journal_scalar(home, "SELECT count(*) FROM task_journal WHERE state = 'Completed'")
    steps = journal_scalar(home, "SELECT count(*) FROM task_steps WHERE status = 'completed'")
    if done != tasks or steps != tasks * STEPS_PER_TASK:
        raise RuntimeError(
            f"pfar left {done} Completed tasks / {steps} completed steps, "
            f"expected {tasks} / {tasks * STEPS_PER_TASK}"
        )
    mode = journal_scalar_text(home, "PRAGMA journal_mode")
    return f"{_cipher(home)}, journal={mode}, synchronous=FULL, {note}, verified {steps} steps"


def journal_scalar_text(home: Home, sql: str) -> str:
    conn = connect(home.sessions_db, key=keys.unlock(home), readonly=True)
    try:
        return str(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def _sinks_label(sinks: tuple[str, ...]) -> str:
    return f"sinks={'+'.join(sinks) or 'none'}"


# ------------------------------------------------------------- 1 and 2: throughput


@dataclass
class _Window:
    seconds: float
    commits: int
    writes: int


async def _finished(kernel: Kernel, task_id: str) -> None:
    """Wait until the kernel stops driving `task_id` (it Completed, failed or parked).

    The kernel drives each task in an asyncio.Task (`kernel.driver.coroutine`); awaiting
    it observes the end without polling the journal, which is left for a task that no
    coroutine holds.
    """
    driver = kernel.driver.coroutine(task_id)
    if driver is not None:
        await driver
        return
    while True:  # the journal has no event to wait on: look every millisecond
        state = (await kernel.journal.tasks.get(task_id)).state
        if state.terminal or state.parked:
            return
        await asyncio.sleep(0.001)


async def _sequential_run(home: Home, tasks: int, warmup: int) -> _Window:
    kernel = new_kernel(home)
    await kernel.start()
    try:

        async def one(i: int) -> None:
            await kernel.submit(TEMPLATE, f"task {i}")
            await kernel.wait_idle()

        for i in range(warmup):
            await one(-1 - i)
        s0 = await kernel.statistics()
        t0 = time.perf_counter()
        async with asyncio.timeout(RUN_TIMEOUT_S):
            for i in range(tasks):
                await one(i)
        seconds = time.perf_counter() - t0
        s1 = await kernel.statistics()
        return _Window(seconds, s1.commits - s0.commits, s1.writes - s0.writes)
    finally:
        await kernel.shutdown()


async def _concurrent_run(home: Home, tasks: int, width: int, warmup: int) -> _Window:
    kernel = new_kernel(home)
    await kernel.start()
    try:

        async def one(i: int) -> None:
            task = await kernel.submit(TEMPLATE, f"task {i}")
            await _finished(kernel, task.task_id)

        async with asyncio.timeout(RUN_TIMEOUT_S):
            await bounded_gather(warmup, width, lambda i: one(-1 - i))
            await kernel.wait_idle()
        s0 = await kernel.statistics()
        t0 = time.perf_counter()
        async with asyncio.timeout(RUN_TIMEOUT_S):
            await bounded_gather(tasks, width, one)
        seconds = time.perf_counter() - t0
        s1 = await kernel.statistics()
        return _Window(seconds, s1.commits - s0.commits, s1.writes - s0.writes)
    finally:
        await kernel.shutdown()


def _profiled(profile_path: str | None, fn: Callable[[], Any]) -> Any:
    if not profile_path:
        return fn()
    prof = cProfile.Profile()
    try:
        return prof.runcall(fn)
    finally:
        prof.dump_stats(profile_path)


def pfar_sequential(
    tasks: int = 200,
    *,
    warmup: int = 5,
    sinks: tuple[str, ...] = ("owner",),
    base_dir: BaseDir = None,
    profile: str | None = None,
    encrypted: bool = True,
) -> Result:
    """pfar: one 10-step task at a time (submit, wait until Completed, next)."""
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home", sinks=sinks, encrypted=encrypted)
        win = _profiled(profile, lambda: asyncio.run(_sequential_run(home, tasks, warmup)))
        note = _verify(
            home,
            tasks + warmup,
            note=(
                f"{_sinks_label(sinks)}, {win.writes / tasks:.1f} writes/task in "
                f"{win.commits / tasks:.1f} commits/task"
            ),
        )
    return Result.measured(
        _name(encrypted), "sequential", tasks * STEPS_PER_TASK, win.seconds, tasks=tasks, note=note
    )


def _name(encrypted: bool) -> str:
    """The row's name: pfar as `pfar init` makes it (encrypted), or its plain vault."""
    return "pfar" if encrypted else "pfar-plain"


def pfar_concurrent(
    tasks: int = 640,
    *,
    width: int = WIDTH,
    warmup: int = 8,
    sinks: tuple[str, ...] = ("owner",),
    base_dir: BaseDir = None,
    profile: str | None = None,
    encrypted: bool = True,
) -> Result:
    """pfar: `tasks` tasks with `width` in flight, all driven by one kernel's event loop."""
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home", sinks=sinks, encrypted=encrypted)
        win = _profiled(profile, lambda: asyncio.run(_concurrent_run(home, tasks, width, warmup)))
        per_commit = win.writes / win.commits if win.commits else 0.0
        note = _verify(
            home,
            tasks + warmup,
            note=(
                f"{_sinks_label(sinks)}, {win.writes / tasks:.1f} writes/task in "
                f"{win.commits} commits ({per_commit:.1f} writes/commit)"
            ),
        )
    return Result.measured(
        _name(encrypted),
        "concurrent",
        tasks * STEPS_PER_TASK,
        win.seconds,
        tasks=tasks,
        concurrency=width,
        mechanism="asyncio, one kernel",
        note=note,
    )


# ------------------------------------------------------------- children (subprocesses)


def _emit(event: str, **fields: Any) -> None:
    """One JSON line to the parent; `t` is CLOCK_MONOTONIC, comparable across processes."""
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def _proc_status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


async def _child_hold(home: Home, tasks: int) -> None:
    """Submit `tasks` at once; tell the parent when all are inside step HOLD_STEP; wait."""

    def on_hold(n: int) -> None:
        if n == tasks:
            _emit("held", tasks=n)

    kernel = new_kernel(home, hold_step=HOLD_STEP, on_hold=on_hold)
    await kernel.start()
    await asyncio.gather(*(kernel.submit(TEMPLATE, f"task {i}") for i in range(tasks)))
    await asyncio.Event().wait()  # the parent sends SIGKILL


async def _child_resume(home: Home, tasks: int) -> None:
    """Restart after the kill: recover, then wait until every task has finished."""
    _emit("imported")
    kernel = new_kernel(home)
    t0 = time.monotonic()
    report = await kernel.start()
    _emit("ready", resumed=len(report.resumed), retried=len(report.retried), t_start=t0)
    await kernel.wait_idle()
    counts = await kernel.journal.tasks.counts()
    _emit("done", counts=counts)
    await kernel.shutdown()
    _emit("stopped")


async def _child_parked(home: Home, tasks: int) -> None:
    """Submit `tasks` at once; each runs 5 reads and parks on an approval. Report memory."""
    _emit("imported", rss_kb=_proc_status_kb("VmRSS"), hwm_kb=_proc_status_kb("VmHWM"))
    kernel = new_kernel(home)
    await kernel.start()
    started_rss = _proc_status_kb("VmRSS")
    await asyncio.gather(*(kernel.submit(APPROVAL_TEMPLATE, f"task {i}") for i in range(tasks)))
    await kernel.wait_idle()
    await asyncio.sleep(0.2)  # let the owner channel deliver the approval prompts
    counts = await kernel.journal.tasks.counts()
    _emit(
        "parked",
        counts=counts,
        started_rss_kb=started_rss,
        rss_kb=_proc_status_kb("VmRSS"),
        hwm_kb=_proc_status_kb("VmHWM"),
        running=(await kernel.statistics()).running,
    )
    await kernel.shutdown()


def child_main(mode: str, home_dir: str, tasks: int) -> int:
    home = Home(Path(home_dir))
    run = {"hold": _child_hold, "resume": _child_resume, "parked": _child_parked}[mode]
    asyncio.run(run(home, tasks))
    return 0


class ChildProcess:
    """A Python script run as a child: its JSON lines are read by a thread into a queue
    (stamped on arrival), its stderr goes to `err_path`."""

    def __init__(self, script: Path, argv: list[str], err_path: Path) -> None:
        env = {**os.environ}
        env.pop("PFAR_FAULT", None)
        # as an installed pfar starts: from compiled bytecode (pip compiles it at install;
        # an editable install writes it at first import). With PYTHONDONTWRITEBYTECODE
        # set, every start would compile pfar from source again, adding about 0.2 s to the
        # time from spawn; the first child (the one killed) writes the cache.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.err_path = err_path
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(script), *argv],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            msg["rx"] = time.monotonic()
            self.lines.put(msg)
        self.lines.put(None)

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(
                    f"child {self.proc.args!r}: no {event!r} in {timeout}s"
                ) from None
            if msg is None:
                code = self.proc.wait()
                err = self.err_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"child exited ({code}) before {event!r}:\n{err}")
            if msg["event"] == event:
                return msg

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.reap()

    def reap(self, timeout: float = 60.0) -> None:
        """Wait for the child (killing it if it hangs) and close its pipe."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _Child(ChildProcess):
    """This file run with --child MODE HOME TASKS; its stderr goes to a file in the home."""

    def __init__(self, mode: str, home: Home, tasks: int) -> None:
        argv = ["--child", mode, str(home.root), str(tasks)]
        super().__init__(Path(__file__).resolve(), argv, home.root / f"bench-child-{mode}.err")


# -------------------------------------------------------------------- 3: recovery


@dataclass(frozen=True)
class RecoveryFigures:
    tasks: int
    steps_left: int  # steps still to run after the restart
    spawn_to_ready: float  # new process spawned -> kernel.start() returned (recovery done)
    spawn_to_done: float  # new process spawned -> every task Completed
    start_to_ready: float  # Kernel.start() called -> returned (in the child)
    start_to_done: float  # Kernel.start() called -> every task Completed
    spawn_to_imported: float  # interpreter + imports, before the kernel is built
    resumed: int


def pfar_recovery(
    tasks: int = 1000, *, base_dir: BaseDir = None, encrypted: bool = True
) -> RecoveryFigures:
    """SIGKILL a kernel with `tasks` tasks all inside step HOLD_STEP, restart, time it."""
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home", encrypted=encrypted)
        first = _Child("hold", home, tasks)
        try:
            first.wait_for("held", timeout=120)
        finally:
            first.kill()
        executing = journal_scalar(
            home, "SELECT count(*) FROM task_journal WHERE state = 'Executing'"
        )
        durable = journal_scalar(home, "SELECT count(*) FROM task_steps WHERE status = 'completed'")
        if executing != tasks or durable != tasks * HOLD_STEP:
            raise RuntimeError(
                f"after the kill: {executing} Executing tasks, {durable} durable steps; "
                f"expected {tasks} and {tasks * HOLD_STEP}"
            )
        t_spawn = time.monotonic()
        second = _Child("resume", home, tasks)
        try:
            imported = second.wait_for("imported", timeout=60)
            ready = second.wait_for("ready", timeout=60)
            done = second.wait_for("done", timeout=120)
            second.wait_for("stopped", timeout=120)
        finally:
            second.reap()
        completed = done["counts"].get("Completed", 0)
        steps = journal_scalar(home, "SELECT count(*) FROM task_steps WHERE status = 'completed'")
        if completed != tasks or steps != tasks * STEPS_PER_TASK:
            raise RuntimeError(
                f"after recovery: {done['counts']} and {steps} completed steps, expected "
                f"{tasks} Completed and {tasks * STEPS_PER_TASK} steps"
            )
    return RecoveryFigures(
        tasks=tasks,
        steps_left=tasks * (STEPS_PER_TASK - HOLD_STEP),
        spawn_to_ready=ready["t"] - t_spawn,
        spawn_to_done=done["t"] - t_spawn,
        start_to_ready=ready["t"] - ready["t_start"],
        start_to_done=done["t"] - ready["t_start"],
        spawn_to_imported=imported["t"] - t_spawn,
        resumed=ready["resumed"],
    )


# ---------------------------------------------------------------- start-up


def pfar_startup(
    *, history: int = 200, repeats: int = 5, encrypted: bool = True, base_dir: BaseDir = None
) -> float:
    """Median seconds from `Kernel(...)` to a started kernel (key, vault checks, migrations,
    recovery of nothing) on a home whose journal holds `history` finished tasks."""
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home", encrypted=encrypted)
        asyncio.run(_sequential_run(home, history, 0))
        keys.forget(home)  # each start finds the key as a new process would

        async def once() -> float:
            t0 = time.perf_counter()
            kernel = new_kernel(home)
            await kernel.start()
            seconds = time.perf_counter() - t0
            await kernel.shutdown()
            return seconds

        times = []
        for _ in range(max(1, repeats)):
            keys.forget(home)
            times.append(asyncio.run(once()))
    return statistics.median(times)


# ---------------------------------------------------------------- 4: plan_recovery


@dataclass(frozen=True)
class PlanFigures:
    unfinished: int
    finished: int
    build_seconds: float
    open_seconds: float
    first_seconds: float  # first plan_recovery on a freshly opened journal
    best_seconds: float  # best of the repeats
    decisions: int
    db_mb: float


def _template_task(task_id: str, state: TaskState, current_step: int, at: str) -> TaskRecord:
    plan = {"steps": [_step("bench.noop", i) for i in range(STEPS_PER_TASK)]}
    payload: Payload = (
        Executing(current_step=current_step) if state is TaskState.Executing else EMPTY[state]
    )
    event = {
        "event_id": task_id,
        "adapter": "api",
        "template_id": TEMPLATE,
        "text": "task",
        "principal": "owner",
        "payload": {},
    }
    return TaskRecord(
        task_id=task_id,
        template_id=TEMPLATE,
        principal="owner",
        trigger_event=event,
        state=state,
        payload=payload,
        phase=state.phase or "execute",
        plan=plan,
        execute_progress={"current_step": current_step, "last_completed": current_step - 1},
        extracted_metadata={"text": "task"},
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id="0" * 32,
        created_at=at,
        updated_at=at,
        error=None,
        event_id=task_id,
        template_hash="0" * 16,
        recovery_attempts=0,
    )


def _build_journal(home: Home, unfinished: int, finished: int) -> None:
    """Rows written with pfar's own insert (one prototype each), copied in bulk by SQL."""
    conn = connect(home.sessions_db, key=keys.unlock(home))
    try:
        conn.execute("PRAGMA synchronous = OFF")  # setup only; the measured read is unaffected
        conn.execute("PRAGMA cache_size = -200000")
        now = datetime.now(UTC)
        old = rfc3339(now - timedelta(days=2))
        recent = rfc3339(now - timedelta(seconds=30))
        conn.execute("BEGIN")
        tasks_sql.insert_txn(conn, _template_task("proto-done", TaskState.Completed, 10, old))
        tasks_sql.insert_txn(conn, _template_task("proto-open", TaskState.Executing, 5, recent))
        copy = (
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?) "
            "INSERT INTO task_journal SELECT printf('%s-%08d', ?, x), template_id, principal, "
            "trigger_event, state, phase, plan_json, execute_progress, extracted_metadata, "
            "data_ceiling, output_sinks, trace_id, created_at, "
            # spread updated_at so the (updated_at) indexes see distinct keys
            "strftime('%Y-%m-%dT%H:%M:%fZ', updated_at, printf('-%d seconds', x % ?)), "
            "error, state_detail, printf('%s-%08d', ?, x), template_hash, recovery_attempts, kind "
            "FROM n, task_journal WHERE task_journal.task_id = ?"
        )
        # finished ones first, so the unfinished are scattered at the end of a big table
        # finished: spread over a day; unfinished: over the last 8 minutes (all resumable)
        conn.execute(copy, (finished, "done", 86_400, "done", "proto-done"))
        conn.execute(copy, (unfinished, "open", 480, "open", "proto-open"))
        conn.execute("DELETE FROM task_journal WHERE task_id LIKE 'proto-%'")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def pfar_plan_recovery(
    unfinished: int = 10_000,
    finished: int = 1_000_000,
    *,
    repeats: int = 3,
    base_dir: BaseDir = None,
) -> PlanFigures:
    """Time plan_recovery() (what `pfar recover --dry-run` and kernel start run)."""
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home")
        t0 = time.perf_counter()
        _build_journal(home, unfinished, finished)
        build = time.perf_counter() - t0
        db_mb = home.sessions_db.stat().st_size / 1e6
        n_open = journal_scalar(
            home,
            "SELECT count(*) FROM task_journal WHERE state NOT IN "
            "('Completed', 'Failed', 'Abandoned')",
        )
        n_all = journal_scalar(home, "SELECT count(*) FROM task_journal")
        if n_open != unfinished or n_all != unfinished + finished:
            raise RuntimeError(f"built {n_open} unfinished of {n_all}, wrong")
        config = Config()
        max_age = timedelta(seconds=config.recovery.max_task_age_seconds)
        t0 = time.perf_counter()
        journal = open_journal(home.sessions_db, key=keys.unlock(home))
        opened = time.perf_counter() - t0

        async def timed() -> tuple[float, int, int]:
            """plan_recovery's time, decisions and resumes: figures only, never the plan
            itself as asyncio.run's result (on the way out, asyncio.run reprs its main
            task, result included, when it puts SIGINT's handler back: a dataclass is
            repr'd whole, 10,000 decisions and their tasks, about 0.3 s)."""
            t0 = time.perf_counter()
            plan = await plan_recovery(
                journal,
                datetime.now(UTC),
                max_age,
                config.recovery.max_recovery_attempts,
                True,
            )
            seconds = time.perf_counter() - t0
            resumes = sum(1 for x in plan.decisions if x.action is RecoveryAction.ResumeExecution)
            return seconds, len(plan.decisions), resumes

        try:
            times: list[float] = []
            decisions = 0
            for _ in range(max(1, repeats)):
                seconds, decisions, resumes = asyncio.run(timed())
                times.append(seconds)
                if decisions != unfinished or resumes != unfinished:
                    raise RuntimeError(f"{decisions} decisions, {resumes} resumes")
        finally:
            journal.close(checkpoint=False)
    return PlanFigures(unfinished, finished, build, opened, times[0], min(times), decisions, db_mb)


# ---------------------------------------------------------------- 5: parked memory


@dataclass(frozen=True)
class MemoryFigures:
    tasks: int
    parked: int
    hwm_mb: float  # peak RSS of the kernel process (VmHWM)
    rss_mb: float  # RSS with everything parked
    baseline_mb: float  # RSS after interpreter + imports, before the kernel
    started_mb: float  # RSS after kernel.start(), before any task
    running: int  # coroutines still driving tasks once all are parked (expected 0)


def pfar_parked_memory(tasks: int = 1000, *, base_dir: BaseDir = None) -> MemoryFigures:
    with fresh_dir(base_dir) as d:
        home = make_home(d / "home")
        child = _Child("parked", home, tasks)
        try:
            imported = child.wait_for("imported", timeout=60)
            parked = child.wait_for("parked", timeout=120)
        finally:
            child.reap()
        n = parked["counts"].get("AwaitingApproval", 0)
        pending = journal_scalar(
            home, "SELECT count(*) FROM pending_approvals WHERE status = 'pending'"
        )
        if n != tasks or pending != tasks:
            raise RuntimeError(f"{parked['counts']}, {pending} pending approvals; expected {tasks}")
    return MemoryFigures(
        tasks=tasks,
        parked=n,
        hwm_mb=parked["hwm_kb"] / 1024,
        rss_mb=parked["rss_kb"] / 1024,
        baseline_mb=imported["rss_kb"] / 1024,
        started_mb=parked["started_rss_kb"] / 1024,
        running=parked["running"],
    )


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Target:
    what: str
    figure: str
    goal: str
    met: bool


def targets(
    seq: Result | None,
    conc: Result | None,
    rec: RecoveryFigures | None,
    plan: PlanFigures | None,
    mem: MemoryFigures | None,
) -> list[Target]:
    out: list[Target] = []
    if seq is not None:
        out.append(
            Target(
                "1 sequential",
                f"{seq.steps_per_s:,.0f} steps/s",
                f">= {TARGET_SEQUENTIAL:,.0f} steps/s",
                seq.steps_per_s >= TARGET_SEQUENTIAL,
            )
        )
    if conc is not None:
        out.append(
            Target(
                f"2 concurrent ({conc.concurrency} in flight)",
                f"{conc.steps_per_s:,.0f} steps/s",
                f">= {TARGET_CONCURRENT:,.0f} steps/s",
                conc.steps_per_s >= TARGET_CONCURRENT,
            )
        )
    if rec is not None:
        out.append(
            Target(
                f"3 recovery of {rec.tasks:,} killed tasks",
                f"ready {rec.spawn_to_ready:.3f} s, all Completed {rec.spawn_to_done:.3f} s "
                f"after spawn (in-kernel: {rec.start_to_ready:.3f} s / "
                f"{rec.start_to_done:.3f} s)",
                f"< {TARGET_RECOVERY_S:g} s to all Completed",
                rec.spawn_to_done < TARGET_RECOVERY_S,
            )
        )
    if plan is not None:
        full = plan.unfinished >= 10_000 and plan.finished >= 1_000_000
        out.append(
            Target(
                f"4 plan_recovery {plan.unfinished:,} open / {plan.finished:,} finished",
                f"first {plan.first_seconds * 1000:.0f} ms, best {plan.best_seconds * 1000:.0f} ms",
                f"< {TARGET_PLAN_S:g} s" + ("" if full else " (at 10k/1M; smaller run here)"),
                plan.first_seconds < TARGET_PLAN_S,
            )
        )
    if mem is not None:
        out.append(
            Target(
                f"5 peak RSS, {mem.parked:,} tasks parked on approvals",
                f"VmHWM {mem.hwm_mb:.1f} MB (now {mem.rss_mb:.1f} MB; after imports "
                f"{mem.baseline_mb:.1f} MB)",
                f"< {TARGET_RSS_MB:g} MB",
                mem.hwm_mb < TARGET_RSS_MB,
            )
        )
    return out


def format_targets(rows: list[Target]) -> str:
    width = max((len(t.what) for t in rows), default=10)
    out = []
    for t in rows:
        mark = "MET    " if t.met else "NOT MET"
        out.append(f"{mark} {t.what:<{width}}  {t.figure}   (target {t.goal})")
    return "\n".join(out)


def describe_recovery(rec: RecoveryFigures) -> str:
    return (
        f"recovery: {rec.tasks} tasks killed inside step {HOLD_STEP + 1} of {STEPS_PER_TASK} "
        f"({rec.steps_left} steps left); new process: imports {rec.spawn_to_imported:.3f} s, "
        f"kernel ready {rec.spawn_to_ready:.3f} s, all Completed {rec.spawn_to_done:.3f} s "
        f"after spawn; Kernel.start() {rec.start_to_ready:.3f} s, start -> all Completed "
        f"{rec.start_to_done:.3f} s ({rec.resumed} resumed)"
    )


def describe_plan(p: PlanFigures) -> str:
    return (
        f"plan_recovery: {p.unfinished:,} unfinished + {p.finished:,} finished tasks "
        f"({p.db_mb:.0f} MB sessions.db, built in {p.build_seconds:.1f} s): open_journal "
        f"{p.open_seconds * 1000:.0f} ms, first plan {p.first_seconds * 1000:.0f} ms, best "
        f"{p.best_seconds * 1000:.0f} ms, {p.decisions:,} decisions"
    )


def describe_memory(m: MemoryFigures) -> str:
    return (
        f"memory: {m.parked:,} tasks parked on approvals: VmHWM {m.hwm_mb:.1f} MB, VmRSS "
        f"{m.rss_mb:.1f} MB; after imports {m.baseline_mb:.1f} MB, after Kernel.start() "
        f"{m.started_mb:.1f} MB; coroutines left {m.running}"
    )


def recovery_result(rec: RecoveryFigures) -> Result:
    """The recovery figure as a table row: steps left after the restart, spawn -> done."""
    return Result.measured(
        "pfar",
        "recovery",
        rec.steps_left,
        rec.spawn_to_done,
        tasks=rec.tasks,
        concurrency=rec.tasks,
        mechanism="SIGKILL + new process",
        note=f"ready after {rec.spawn_to_ready:.3f} s (imports {rec.spawn_to_imported:.3f} s)",
    )


def print_profile(path: str, limit: int = 25) -> None:
    stats = pstats.Stats(path)
    stats.sort_stats("cumulative").print_stats(limit)
    stats.sort_stats("tottime").print_stats(limit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="pfar's own benchmarks and targets.")
    parser.add_argument("--seq", type=int, default=200, help="tasks, sequential (200)")
    parser.add_argument("--conc", type=int, default=640, help="tasks, concurrent (640)")
    parser.add_argument("--width", type=int, default=WIDTH, help="tasks in flight (64)")
    parser.add_argument("--recovery-tasks", type=int, default=1000)
    parser.add_argument("--unfinished", type=int, default=10_000)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--parked", type=int, default=1000)
    parser.add_argument(
        "--sinks",
        default="owner",
        help="output sinks of the bench template, comma separated ('' for none)",
    )
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument(
        "--only",
        action="append",
        choices=["sequential", "concurrent", "recovery", "plan", "memory"],
        help="run only these (repeatable); default all",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="cProfile sequential/concurrent runs (main thread) here"
    )
    parser.add_argument("--base-dir", default=None, help="where temp dirs go (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="also print figures as JSON lines")
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "HOME", "TASKS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        mode, home_dir, n = args.child
        return child_main(mode, home_dir, int(n))
    if args.quick:
        args.seq, args.conc, args.finished = min(args.seq, 50), min(args.conc, 192), 100_000
    only = args.only or ["sequential", "concurrent", "recovery", "plan", "memory"]
    sinks = tuple(s for s in args.sinks.split(",") if s)
    base = args.base_dir
    prof_dir = Path(args.profile) if args.profile else None
    if prof_dir:
        prof_dir.mkdir(parents=True, exist_ok=True)

    print(environment(base))
    started = time.perf_counter()
    seq = conc = None
    rec = plan = mem = None
    if "sequential" in only:
        prof = str(prof_dir / "sequential.prof") if prof_dir else None
        seq = pfar_sequential(args.seq, sinks=sinks, base_dir=base, profile=prof)
        print(f"  done pfar sequential: {seq.steps_per_s:.1f} steps/s", flush=True)
    if "concurrent" in only:
        prof = str(prof_dir / "concurrent.prof") if prof_dir else None
        conc = pfar_concurrent(
            args.conc, width=args.width, sinks=sinks, base_dir=base, profile=prof
        )
        print(f"  done pfar concurrent: {conc.steps_per_s:.1f} steps/s", flush=True)
    if "recovery" in only:
        rec = pfar_recovery(args.recovery_tasks, base_dir=base)
        print("  " + describe_recovery(rec), flush=True)
    if "plan" in only:
        plan = pfar_plan_recovery(args.unfinished, args.finished, base_dir=base)
        print("  " + describe_plan(plan), flush=True)
    if "memory" in only:
        mem = pfar_parked_memory(args.parked, base_dir=base)
        print("  " + describe_memory(mem), flush=True)
    rows = [r for r in (seq, conc) if r is not None]
    if rec is not None:
        rows.append(recovery_result(rec))
    print()
    print(format_table(rows))
    print()
    print(format_targets(targets(seq, conc, rec, plan, mem)))
    print(f"\ntotal wall time {time.perf_counter() - started:.1f}s")
    if args.json:
        for fig in (seq, conc, rec, plan, mem):
            if fig is not None:
                print(json.dumps({"kind": type(fig).__name__, **asdict(fig)}))
    if prof_dir:
        for name in ("sequential", "concurrent"):
            path = prof_dir / f"{name}.prof"
            if path.exists():
                print(f"\n===== cProfile (main thread): {name} =====")
                print_profile(str(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
