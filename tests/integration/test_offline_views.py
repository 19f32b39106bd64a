"""The read-only views through the real CLI with no kernel running: `events`,
`learnings`, `queue`, `channels`, `task context` and `attach` read the vault (the
README says reads need no kernel), and say what only a running kernel knows; with a
kernel running they answer as before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pfar.config import Config
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.vault.home import Home

from ..support import make_home, pfar, running_kernel, said

LESSON = "The bug was in config.rs line 42: the parser expects an array, not an object."

CONFIG = """\
[scheduler]
max_concurrent = 1
[loop]
tools = ["Read"]
[channels.telegram]
owner_user_id = 1
api_url = "http://127.0.0.1:9"
"""


def _scene(home: Home) -> tuple[str, str, str]:
    """A completed loop task that learned something, one that holds the only slot, and
    one queued behind it; then the kernel stops as a crash would."""
    gate = asyncio.Event()

    async def model(request: ChatRequest) -> ChatResponse:
        prompt = request.messages[0].text
        if prompt.startswith("Find"):
            return reply(request, f"Found it. {LESSON}")
        await gate.wait()  # never set: the slot stays held
        return reply(request, "done")

    async def run() -> tuple[str, str, str]:
        kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(model), channels=[])
        await kernel.start()
        op = Operator(kernel)
        try:
            done = await op.start_loop("Find why config loading fails", str(home.root), once=True)
            await kernel.wait_idle()
            assert (await op.task(done.task_id)).state is TaskState.Completed
            busy = await op.start_loop("hold the slot", str(home.root), once=True)
            waiting = await op.start_loop("wait for it", str(home.root), once=True, priority=5)
            for _ in range(500):
                if (await op.task(waiting.task_id)).state is TaskState.Queued:
                    break
                await asyncio.sleep(0.01)
            assert (await op.task(waiting.task_id)).state is TaskState.Queued
            return done.task_id, busy.task_id, waiting.task_id
        finally:
            await kernel.abort()

    return asyncio.run(run())


def test_read_only_views_read_the_vault_when_no_kernel_runs(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONFIG, script='[[turns]]\ntext = "ok"\n')
    done, _busy, waiting = _scene(home)

    events = pfar(home, "events")
    assert events.returncode == 0, said(events)
    assert "TaskCreated" in events.stdout and "TaskCompleted" in events.stdout
    as_json = pfar(home, "events", "--json", "--after", "1")
    assert as_json.returncode == 0, said(as_json)
    first = json.loads(as_json.stdout.splitlines()[0])
    assert first["seq"] == 2

    # a subscriber's offset is only a running kernel's to move: refused, saying why
    sub = pfar(home, "events", "--as", "mine")
    assert sub.returncode == 2
    assert "only a running kernel writes" in said(sub) and "leave out --as" in said(sub)

    learned = pfar(home, "learnings", "--json")
    assert learned.returncode == 0, said(learned)
    assert LESSON in learned.stdout
    found = pfar(home, "learnings", "search", "parser array")
    assert found.returncode == 0, said(found)
    assert "config.rs" in found.stdout

    queue = pfar(home, "queue", "--json")
    assert queue.returncode == 0, said(queue)
    (row,) = json.loads(queue.stdout)
    assert row["task_id"] == waiting and row["priority"] == 5 and row["position"] == 1
    assert "no kernel runs" in row["reason"]

    channels = pfar(home, "channels", "--json")
    assert channels.returncode == 0, said(channels)
    (telegram,) = json.loads(channels.stdout)
    assert telegram["name"] == "telegram" and telegram["state"] == "stopped"
    assert "no kernel runs" in telegram["last_error"]

    context = pfar(home, "task", "context", done[:8])
    assert context.returncode == 0, said(context)
    assert "turns: 2 in the journal" in said(context)

    attach = pfar(home, "attach", done[:8], "--from-start")
    assert attach.returncode == 0, said(attach)
    assert "Found it." in attach.stdout and "task ended: Completed" in said(attach)
    # an unfinished one: what the journal holds, and that it goes on with a kernel
    pending = pfar(home, "attach", waiting[:8])
    assert pending.returncode == 0, said(pending)
    assert "[Queued]" in said(pending) and "goes on when one starts" in said(pending)

    # nothing was written: the viewer's mark did not move (the next look shows it all)
    again = pfar(home, "attach", done[:8])
    assert "Found it." in again.stdout

    with running_kernel(home):
        live = pfar(home, "channels", "--json")
        assert live.returncode == 0, said(live)
        assert json.loads(live.stdout)[0]["state"] != "stopped"
        for args in (
            ("events", "--as", "mine"),
            ("learnings",),
            ("queue",),
            ("task", "context", done[:8]),
            ("attach", done[:8], "--from-start"),
        ):
            answered = pfar(home, *args)
            assert answered.returncode == 0, (args, said(answered))
        assert "no kernel runs" not in said(pfar(home, "queue"))
