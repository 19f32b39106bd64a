"""Writes race a folder swapped for a symlink, and big files meet a running kernel:
nothing lands outside the working directory, and the kernel's memory stays bounded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from pfar.journal import TaskState
from pfar.journal.turns import ResultsTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..support import make_home, running_kernel, wait_for

WRITES = 400

# swaps work/sub (a real folder) for a symlink to `outside` and back, for ever; a
# Write that made `sub` anew while it was away has its files moved back
SWAPPER = textwrap.dedent(
    """
    import os, sys
    work, outside = sys.argv[1], sys.argv[2]
    sub, aside = os.path.join(work, "sub"), os.path.join(work, ".sub-aside")
    while True:
        try:
            os.rename(sub, aside)
            os.symlink(outside, sub)
            os.unlink(sub)
        except OSError:
            pass
        try:
            os.rename(aside, sub)
        except OSError:
            try:
                for name in os.listdir(sub):
                    os.rename(os.path.join(sub, name), os.path.join(aside, name))
                os.rmdir(sub)
            except OSError:
                pass
    """
)


def test_no_write_lands_outside_while_a_folder_is_swapped_for_a_symlink(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    tools = ["Write"]
    home = make_home(
        tmp_path / "home",
        config=f"[loop]\ntools = {json.dumps(tools)}\nalways_allow = {json.dumps(tools)}\n"
        "max_tool_failures = 10000\n[loop.anomaly]\nmax_writes_per_minute = 0\n",
    )
    calls = [
        ToolCall(f"w{i}", "Write", {"file_path": f"sub/f{i}.txt", "content": f"{i}\n"})
        for i in range(WRITES)
    ]

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return reply(request, "", calls)
        return reply(request, "Written.")

    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(work), str(outside)])

    async def go() -> dict[str, tuple[str, bool]]:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("write them", str(work), once=True)
            await op.wait_idle()
            state = (await op.task(started.task_id)).state
            assert state is TaskState.Completed, await op.questions()
            turns = [t.turn for t in await op.journal.loops.turns(started.task_id)]
            return {
                r.call_id: (r.content, r.is_error)
                for t in turns
                if isinstance(t, ResultsTurn)
                for r in t.results
            }

    try:
        told = asyncio.run(go())
    finally:
        swapper.kill()
        swapper.wait()

    assert sorted(p.name for p in outside.iterdir()) == []  # not one landed outside
    created = [cid for cid, (text, error) in told.items() if not error]
    assert created, "the race left no write through; nothing was tested"
    for cid in created:
        i = int(cid[1:])
        # a write that says it was made is in the working directory (in `sub`, or in
        # the folder the swapper had moved aside), with its content
        (made,) = [p for p in work.rglob(f"f{i}.txt") if not p.is_symlink()]
        assert made.read_text() == f"{i}\n", told[cid]
    refused = [text for text, error in told.values() if "outside the task workspace" in text]
    assert refused, "no write met the symlink; the race was not run"


def test_a_symlinked_folder_is_followed_only_while_it_stays_inside(tmp_path: Path) -> None:
    """Deterministic: the folder is a symlink when the write opens it."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "real").mkdir(parents=True)
    outside.mkdir()
    (work / "inside").symlink_to(work / "real")
    (work / "away").symlink_to(outside)
    (work / "rel").symlink_to("real")
    tools = ["Write", "Read"]
    home = make_home(
        tmp_path / "home",
        config=f"[loop]\ntools = {json.dumps(tools)}\nalways_allow = {json.dumps(tools)}\n",
    )
    calls = [
        ToolCall("a", "Write", {"file_path": "inside/a.txt", "content": "a\n"}),
        ToolCall("b", "Write", {"file_path": "away/b.txt", "content": "b\n"}),
        ToolCall("c", "Write", {"file_path": "rel/../away/c.txt", "content": "c\n"}),
        ToolCall("d", "Write", {"file_path": "rel/new/d.txt", "content": "d\n"}),
    ]

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return reply(request, "", calls)
        return reply(request, "Written.")

    async def go() -> dict[str, tuple[str, bool]]:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("write them", str(work), once=True)
            await op.wait_idle()
            turns = [t.turn for t in await op.journal.loops.turns(started.task_id)]
            return {
                r.call_id: (r.content, r.is_error)
                for t in turns
                if isinstance(t, ResultsTurn)
                for r in t.results
            }

    told = asyncio.run(go())
    assert told["a"] == ("Created real/a.txt (2 bytes, 1 line).", False)
    assert told["b"][1] and "outside the task workspace" in told["b"][0]
    assert told["c"][1] and "outside the task workspace" in told["c"][0]
    assert told["d"] == ("Created real/new/d.txt (2 bytes, 1 line).", False)
    assert list(outside.iterdir()) == []


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc")


def test_a_huge_one_line_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A 300 MB file of one line, then a tree of many files: Read and Glob in a loop
    task, while another task's `pfar tasks` answers. The kernel's peak memory stays
    far below the file's size (before, Read took the whole line in)."""
    work = tmp_path / "work"
    work.mkdir()
    big = work / "big.txt"
    with big.open("wb") as f:
        block = b"x" * (1 << 20)
        for _ in range(300):
            f.write(block)
    tools = ["Read", "Glob", "Grep"]
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        tool_calls = [
          { id = "r", name = "Read", input = { file_path = "big.txt" } },
          { id = "g", name = "Glob", input = { pattern = "**/*.txt" } },
          { id = "s", name = "Grep", input = { pattern = "y", path = "big.txt" } },
        ]

        [[turns]]
        text = "Read it."
        """
    )
    config = f"[loop]\ntools = {json.dumps(tools)}\nalways_allow = {json.dumps(tools)}\n"
    home = make_home(tmp_path / "home", script=script, config=config)
    with running_kernel(home) as k:
        before = _peak_kb(k.proc.pid)
        task_id = k.request("loop", prompt="read big.txt", directory=str(work), once=True)[
            "task_id"
        ]

        def state() -> str:
            return str(k.request("task_show", task_id=task_id)["task"]["state"])

        wait_for(lambda: state() == "Completed", timeout=120, what="the read to end")
        assert k.request("tasks")  # still answering
        peak = _peak_kb(k.proc.pid)
    grown_mb = (peak - before) / 1024
    assert grown_mb < 100, f"the kernel's peak grew by {grown_mb:.0f} MB reading a 300 MB line"
