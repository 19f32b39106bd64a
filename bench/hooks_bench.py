"""What hooks and resource locks cost (seed 001, "Hook Points Overview" and 4.3).

Hooks: one loop task makes N tool calls (a Read each, one per model turn, a scripted
model) three times: with no handler, with one observe-only Python handler at
PostToolUse, and with one shell handler there (`cat > /dev/null`: a process per
call). The figure is the handler's cost per step, beside the raw SQLite floor (one
fsync'd commit) as a ratio.

Locks: `LockManager.hold` acquire and release, uncontended and with 64 holders taking
overlapping pairs of 8 files at once: in memory alone, and journaled as the kernel does
it (each acquisition one commit to `resource_locks`, group-committed; each release
riding on the next commit).

Run: `python -m bench.hooks_bench [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

try:
    from bench.common import fresh_dir, scalar
    from bench.floor import sqlite_floor
except ModuleNotFoundError:  # run as a script: python bench/hooks_bench.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.common import fresh_dir, scalar
    from bench.floor import sqlite_floor

from pfar.config import Config
from pfar.journal import Journal
from pfar.journal.locks_sql import LockOwner
from pfar.journal.sqlite import open_journal
from pfar.kernel import Kernel
from pfar.kernel.locks import LockManager, LockTable
from pfar.kernel.setup_home import init_home
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.llm.messages import ToolCall
from pfar.runners.loop.tasks import LoopRequest
from pfar.tools.base import Resource
from pfar.tools.processes import start_time
from pfar.vault import keys
from pfar.vault.home import Home

HANDLERS = {
    "no handler": "",
    "one Python handler (observe)": (
        '[[hooks]]\npoint = "PostToolUse"\npython = "bench.hooks_bench:observe"\n'
    ),
    "one shell handler": '[[hooks]]\npoint = "PostToolUse"\ncommand = "cat > /dev/null"\n',
}


def observe(event: dict[str, object]) -> None:
    """The observe-only Python handler: looks, changes nothing."""
    del event


def _model(calls: int) -> ScriptedChatModel:
    def answer(request: ChatRequest) -> ChatResponse:
        made = sum(1 for m in request.messages if m.role == "assistant")
        if made >= calls:
            return reply(request, "done")
        return reply(request, "", [ToolCall(f"c{made}", "Read", {"file_path": "a.txt"})])

    return ScriptedChatModel(answer)


async def _steps(calls: int, hooks: str, base: str | None) -> float:
    """Seconds for one loop task's `calls` tool calls, with `hooks` in config."""
    with fresh_dir(base) as d:
        work = d / "work"
        work.mkdir()
        (work / "a.txt").write_text("alpha\n")
        home = Home(d / "home")
        init_home(home, examples=False, key_file=home.root.parent / f"{home.root.name}.key")
        home.config.write_text(
            '[loop]\ntools = ["Read"]\nmax_iterations = 100000\n'
            "max_minutes_without_progress = 10000\n" + hooks
        )
        kernel = Kernel(home, Config.load(home.config), model=_model(calls))
        await kernel.start()
        try:
            t0 = time.perf_counter()
            await kernel.start_loop(LoopRequest("read it", str(work), once=True))
            await kernel.wait_idle()
            seconds = time.perf_counter() - t0
        finally:
            await kernel.shutdown()
        done = scalar(home.sessions_db, "SELECT count(*) FROM task_steps")
        if done != calls:
            raise RuntimeError(f"{done} of {calls} tool calls made")
    return seconds


def _table(d: Path) -> tuple[Journal, LockTable]:
    home = Home(d / "home")
    init_home(home, examples=False, key_file=home.root.parent / f"{home.root.name}.key")
    journal = open_journal(home.sessions_db, key=keys.unlock(home))
    owner = LockOwner("bench", "here", os.getpid(), start_time(os.getpid()) or 0)
    return journal, LockTable(journal.locks, owner, 60, lambda pid, started: True)


async def _locks_alone(n: int, table: LockTable | None = None) -> float:
    manager = LockManager(60, table=table)
    file = (Resource("file", "/w/a.txt", "exclusive"),)
    t0 = time.perf_counter()
    for i in range(n):
        async with manager.hold(f"t:{i}", file):
            pass
    return n / (time.perf_counter() - t0)


async def _locks_contended(
    n: int, holders: int = 64, files: int = 8, table: LockTable | None = None
) -> float:
    manager = LockManager(60, table=table)
    names = [f"/w/{i}.txt" for i in range(files)]

    async def holder(h: int) -> None:
        for i in range(n // holders):
            pair = (
                Resource("file", names[(h + i) % files], "exclusive"),
                Resource("file", names[(h + i + 1) % files], "shared"),
            )
            async with manager.hold(f"t{h}:{i}", pair):
                await asyncio.sleep(0)

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for h in range(holders):
            tg.create_task(holder(h))
    return (n // holders) * holders * 2 / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--dir", default=None, help="where to put the databases")
    args = parser.parse_args(argv)
    calls = 100 if args.quick else 400
    floor = sqlite_floor(2000 if args.quick else 5000, base_dir=args.dir)
    commit = 1 / floor.steps_per_s
    print(
        f"floor (one fsync'd commit): {floor.steps_per_s:,.0f} commits/s ({commit * 1e6:,.0f} µs)"
    )
    runs = {label: asyncio.run(_steps(calls, hooks, args.dir)) for label, hooks in HANDLERS.items()}
    base = runs["no handler"] / calls
    print("| handlers at PostToolUse | tool calls | µs a step | hook cost a step (µs) | × floor |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds in runs.items():
        per = seconds / calls
        extra = per - base
        print(
            f"| {label} | {calls:,} | {per * 1e6:,.0f} | {extra * 1e6:,.0f} | "
            f"{extra / commit:.2f} |"
        )
    n = 20_000 if args.quick else 100_000
    alone = asyncio.run(_locks_alone(n))
    contended = asyncio.run(_locks_contended(n))
    print(f"locks in memory, one holder: {alone:,.0f} acquire+release/s")
    print(f"locks in memory, 64 holders on 8 files (pairs): {contended:,.0f} acquire+release/s")
    journaled_n = 500 if args.quick else 2000
    with fresh_dir(args.dir) as d:
        journal, table = _table(d)
        try:
            one = asyncio.run(_locks_alone(journaled_n, table))
            many = asyncio.run(_locks_contended(journaled_n * 4, table=table))
        finally:
            journal.close()
    print(
        f"locks journaled, one holder: {one:,.0f} acquire+release/s "
        f"({one / floor.steps_per_s:.2f} × floor commits/s)"
    )
    print(
        f"locks journaled, 64 holders on 8 files (pairs): {many:,.0f} acquire+release/s "
        f"({many / floor.steps_per_s:.2f} × floor commits/s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
