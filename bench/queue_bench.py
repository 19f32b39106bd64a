"""What waiting in the queue costs (seed 001, Phase 1.2): 1,000 loop tasks submitted at
once to one kernel, first with no limit, then with `[scheduler] max_concurrent = 64`.

Each task is one model answer (a scripted model, no tool) that completes it. The
figure is the scheduling overhead per task: the difference of the two runs' seconds
per task, beside the raw SQLite floor of the same run (one fsync'd commit) as a
ratio. Run: `python -m bench.queue_bench [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

try:
    from bench.common import fresh_dir, scalar
    from bench.floor import sqlite_floor
except ModuleNotFoundError:  # run as a script: python bench/queue_bench.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.common import fresh_dir, scalar
    from bench.floor import sqlite_floor

from pfar.config import Config
from pfar.kernel import Kernel
from pfar.kernel.setup_home import init_home
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault.home import Home


def _model(request: ChatRequest) -> ChatResponse:
    return reply(request, "done")


async def _run(tasks: int, max_concurrent: int, base: str | None) -> float:
    """Seconds from the first submit until every task completed."""
    with fresh_dir(base) as d:
        work = d / "work"
        work.mkdir()
        home = Home(d / "home")
        init_home(home, examples=False, key_file=home.root.parent / f"{home.root.name}.key")
        home.config.write_text(
            f'[scheduler]\nmax_concurrent = {max_concurrent}\n[loop]\ntools = ["Read"]\n'
        )
        kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(_model))
        await kernel.start()
        try:
            t0 = time.perf_counter()
            for i in range(tasks):
                await kernel.start_loop(LoopRequest(f"job {i}", str(work), once=True))
            await kernel.wait_idle()
            seconds = time.perf_counter() - t0
        finally:
            await kernel.shutdown()
        done = scalar(
            home.sessions_db, "SELECT count(*) FROM task_journal WHERE state = 'Completed'"
        )
        if done != tasks:
            raise RuntimeError(f"{done} of {tasks} tasks completed")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks")
    parser.add_argument("--dir", default=None, help="where to put the databases")
    args = parser.parse_args(argv)
    tasks = 200 if args.quick else 1000
    floor = sqlite_floor(2000 if args.quick else 5000, base_dir=args.dir)
    free = asyncio.run(_run(tasks, 0, args.dir))
    capped = asyncio.run(_run(tasks, 64, args.dir))
    commit = 1 / floor.steps_per_s
    per_task = (capped - free) / tasks
    print(
        f"floor (one fsync'd commit): {floor.steps_per_s:,.0f} commits/s ({commit * 1e6:,.0f} µs)"
    )
    print("| run | tasks | seconds | tasks/s |")
    print("|---|---:|---:|---:|")
    for label, seconds in (("no limit", free), ("max_concurrent = 64", capped)):
        print(f"| {label} | {tasks:,} | {seconds:.2f} | {tasks / seconds:,.0f} |")
    print(
        f"scheduling overhead: {per_task * 1e6:,.0f} µs a task "
        f"({per_task / commit:.2f} × one floor commit)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
