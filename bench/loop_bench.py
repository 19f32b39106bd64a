"""The agentic loop's durable turns, measured (seed 001 through pfar's loop runner).

Workload: loop tasks whose scripted model calls one trivial Read tool per turn
(`bench.noop`) for TURNS turns, then ends its turn (the task runs `once`, so it
completes). A "durable turn" is one model answer with its tool call and the call's
result, each appended to the conversation in the commit that routes it (two journal
writes per turn, plus the call's step row in the second), before the next turn starts.
Journal: SQLite WAL, synchronous=FULL (pfar's default), behind pfar's group commit.

Figures:

1. turns/s, one loop task at a time
2. turns/s, 64 loop tasks at once (asyncio inside one kernel)
3. the cost of appending a turn to a conversation of 1,000 turns against one of 10:
   the median time of one append (and of reading the turns after the last one seen)
   must not grow with history: the ratio should be about 1.

Each throughput figure is printed beside the raw SQLite floor of the same run (one
fsync'd commit per step), as a ratio. Run: `python -m bench.loop_bench [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

try:
    from bench.common import Result, fresh_dir
    from bench.floor import sqlite_floor
    from bench.pfar_bench import NoopRead, journal_scalar
except ModuleNotFoundError:  # run as a script: python bench/loop_bench.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.common import Result, fresh_dir
    from bench.floor import sqlite_floor
    from bench.pfar_bench import NoopRead, journal_scalar

from pfar.config import Config
from pfar.journal import InboundEvent, Journal, TaskKind, TaskRecord
from pfar.journal.payloads import Executing
from pfar.journal.sqlite import open_journal
from pfar.journal.turns import AssistantTurn, LoopCall, LoopResult, LoopSettings, ResultsTurn
from pfar.kernel import Kernel
from pfar.kernel.setup_home import init_home
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.tools.registry import ToolRegistry
from pfar.vault import keys
from pfar.vault.home import Home

TURNS = 20


def _model(request: ChatRequest) -> ChatResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < TURNS:
        return reply(request, "", [ToolCall(f"c{turn}", "bench.noop", {"i": turn})])
    return reply(request, "done")


def _kernel(root: Path) -> Kernel:
    home = Home(root)
    init_home(home, examples=False, key_file=home.root.parent / f"{home.root.name}.key")
    home.config.write_text('[loop]\ntools = ["bench.noop"]\nalways_allow = ["bench.noop"]\n')
    config = Config.load(home.config)
    return Kernel(home, config, tools=ToolRegistry([NoopRead()]), model=ScriptedChatModel(_model))


async def _turns(tasks: int, concurrency: int, base: str | None) -> Result:
    with fresh_dir(base) as d:
        work = d / "work"
        work.mkdir()
        kernel = _kernel(d / "home")
        await kernel.start()
        try:
            sem = asyncio.Semaphore(concurrency)

            async def one(i: int) -> None:
                async with sem:
                    task = await kernel.start_loop(_request(work, i))
                    while True:
                        state = (await kernel.journal.tasks.get(task.task_id)).state
                        if state.terminal:
                            return
                        await asyncio.sleep(0.0005 if concurrency == 1 else 0.005)

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(tasks)))
            seconds = time.perf_counter() - t0
        finally:
            await kernel.shutdown()
        # the vault is encrypted, as `pfar init` makes it: read with its key
        home = kernel.home
        done = journal_scalar(home, "SELECT count(*) FROM task_journal WHERE state = 'Completed'")
        answers = journal_scalar(
            home, "SELECT count(*) FROM loop_turns WHERE body_json LIKE '%\"assistant\"%'"
        )
        if done != tasks or answers != tasks * (TURNS + 1):
            raise RuntimeError(f"{done} of {tasks} loop tasks completed, {answers} answers")
    return Result.measured(
        "pfar loop",
        "sequential" if concurrency == 1 else "concurrent",
        tasks * TURNS,
        seconds,
        tasks=tasks,
        concurrency=concurrency,
        mechanism="asyncio" if concurrency > 1 else "",
        note=f"{TURNS} tool-calling turns per task, verified {answers} answers journaled",
    )


def _request(work: Path, i: int) -> Any:
    from pfar.runners.loop.tasks import LoopRequest

    return LoopRequest(f"bench task {i}", str(work), once=True)


async def _append_cost(base: str | None, samples: int = 200) -> dict[str, float]:
    """Median seconds of one append (assistant turn + results turn) to a conversation of
    about 10 turns, and of about 1,000."""
    with fresh_dir(base) as d:
        home = Home(d / "home")
        init_home(home, examples=False, key_file=home.root.parent / f"{home.root.name}.key")
        journal = open_journal(home.sessions_db, key=keys.unlock(home), create=False)
        try:
            out: dict[str, float] = {}
            for size in (10, 1000):
                event = InboundEvent(f"append-{size}", "bench", "loop", "p")
                task = TaskRecord.new(
                    TaskKind.loop,
                    "loop",
                    event,
                    Executing(),
                    data_ceiling="internal",
                    output_sinks=[],
                    template_hash="",
                )
                settings = LoopSettings(working_dir=str(d))
                await journal.loops.create(task, settings, "p", event)
                seq = 0
                for n in range(size // 2):
                    seq = await _append_pair(journal, task.task_id, seq, n)
                times = []
                for n in range(samples):
                    t0 = time.perf_counter()
                    seq = await _append_pair(journal, task.task_id, seq, size + n)
                    await journal.loops.turns(task.task_id, after=seq - 2)
                    times.append(time.perf_counter() - t0)
                out[f"turn_{size}"] = statistics.median(times)
            return out
        finally:
            journal.close()


async def _append_pair(journal: Journal, task_id: str, seq: int, n: int) -> int:
    call = LoopCall(id=f"c{n}", name="bench.noop", input={"i": n}, step=n)
    await journal.loops.append(
        task_id, [AssistantTurn(calls=(call,), stop_reason="tool_use")], after=seq, point=None
    )
    result = LoopResult(call_id=f"c{n}", step=n, content='{"ok": true}')
    await journal.loops.append(task_id, [ResultsTurn(results=(result,))], after=seq + 1, point=None)
    return seq + 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks")
    parser.add_argument("--dir", default=None, help="where to put the databases")
    args = parser.parse_args(argv)
    seq_tasks, conc_tasks = (5, 64) if args.quick else (20, 256)
    floor = sqlite_floor(2000 if args.quick else 5000, base_dir=args.dir)
    one = asyncio.run(_turns(seq_tasks, 1, args.dir))
    many = asyncio.run(_turns(conc_tasks, 64, args.dir))
    cost = asyncio.run(_append_cost(args.dir))
    print(f"floor (one fsync'd commit per step): {floor.steps_per_s:,.0f} commits/s")
    print("| loop | turns/s | × floor |")
    print("|---|---:|---:|")
    for r in (one, many):
        label = "one task at a time" if r.concurrency == 1 else "64 tasks at once"
        print(f"| {label} | {r.steps_per_s:,.0f} | {r.steps_per_s / floor.steps_per_s:.2f} |")
    ten, thousand = cost["turn_10"], cost["turn_1000"]
    print(
        f"append a turn pair: {ten * 1e6:,.0f} µs at turn 10, {thousand * 1e6:,.0f} µs at "
        f"turn 1,000 (ratio {thousand / ten:.2f}; history must not cost: about 1)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
