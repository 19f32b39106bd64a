"""The coding tools in a real loop task, through a real kernel: a scripted model writes,
edits, reads, runs, greps and globs in a real directory, and sees each result as the
model would (the tool's `text`), errors marked as errors."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pfar.journal import TaskState
from pfar.journal.turns import ResultsTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..support import make_home

TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]

SCRIPT: list[list[ToolCall]] = [
    [
        ToolCall("w1", "Write", {"file_path": "app/hello.py", "content": "print('hello')\n"}),
        ToolCall("w2", "Write", {"file_path": "notes.md", "content": "say hello\n"}),
    ],
    [
        ToolCall(
            "e1",
            "Edit",
            {"file_path": "app/hello.py", "old_string": "hello", "new_string": "hello, world"},
        ),
        ToolCall(
            "e2", "Edit", {"file_path": "notes.md", "old_string": "absent", "new_string": "x"}
        ),
    ],
    [
        ToolCall("r1", "Read", {"file_path": "app/hello.py"}),
        ToolCall("r2", "Read", {"file_path": "../outside.txt"}),
        ToolCall("g1", "Grep", {"pattern": "hello", "output_mode": "content"}),
        ToolCall("g2", "Glob", {"pattern": "**/*.py"}),
        ToolCall("b1", "Bash", {"command": "python3 app/hello.py && exit 4"}),
    ],
]


def test_a_loop_task_codes_with_the_coding_tools(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "outside.txt").write_text("not yours")
    home = make_home(
        tmp_path / "home",
        config=f"[loop]\ntools = {json.dumps(TOOLS)}\nalways_allow = {json.dumps(TOOLS)}\n",
    )
    seen: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(SCRIPT):
            return reply(request, "", SCRIPT[turn])
        return reply(request, "Done: app/hello.py says hello, world.")

    async def go() -> None:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("write a hello program", str(work))
            await op.wait_idle()
            assert (await op.task(started.task_id)).state is TaskState.WaitingForUser
            turns = [t.turn for t in await op.journal.loops.turns(started.task_id)]
            results = {r.call_id: r for t in turns if isinstance(t, ResultsTurn) for r in t.results}
            assert set(results) == {c.id for calls in SCRIPT for c in calls}
            told = {k: (r.content, r.is_error) for k, r in results.items()}

            assert told["w1"] == ("Created app/hello.py (15 bytes, 1 line).", False)
            assert told["e1"][0].startswith("Edited app/hello.py: replaced 1 occurrence.\n")
            assert told["e2"][1] and "old_string was not found in notes.md" in told["e2"][0]
            assert told["r1"] == ("     1\tprint('hello, world')\n", False)
            assert (
                told["r2"][1]
                and "'../outside.txt' is outside the task workspace" in (told["r2"][0])
            )
            assert told["g1"] == (
                "app/hello.py:1:print('hello, world')\nnotes.md:1:say hello",
                False,
            )
            assert told["g2"] == ("app/hello.py", False)
            assert told["b1"] == ("hello, world\n\n[exit code 4]", False)

            # the model was sent what the tools said, in the API's shape
            last = seen[-1].messages[-1].tool_results
            assert [r.tool_call_id for r in last] == ["r1", "r2", "g1", "g2", "b1"]
            assert last[0].content == "     1\tprint('hello, world')\n"

            steps = await op.journal.tasks.steps(started.task_id)
            assert [s.tool for s in steps] == [c.name for calls in SCRIPT for c in calls]
            writes = [s for s in steps if s.tool in ("Write", "Edit", "Bash")]
            assert all(s.semantics.value == "Write" for s in writes)
            assert steps[0].result["sha256"]  # structured fields are journaled beside the text

    asyncio.run(go())
    assert (work / "app" / "hello.py").read_text() == "print('hello, world')\n"
    assert (work / "notes.md").read_text() == "say hello\n"
    assert (tmp_path / "outside.txt").read_text() == "not yours"


def test_webfetch_with_a_prompt_is_answered_by_the_cheap_model(tmp_path: Path) -> None:
    page = b"<html><head><title>Docs</title></head><body><p>Port is 8123.</p></body></html>"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/docs"
    work = tmp_path / "work"
    work.mkdir()
    home = make_home(
        tmp_path / "home",
        config='[loop]\ntools = ["WebFetch"]\nalways_allow = ["WebFetch"]\n'
        '[loop.policy]\nallowed_private_hosts = ["127.0.0.1"]\n',
    )
    asked: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        if request.context.get("phase") == "tool_summary":
            asked.append(request)
            return reply(request, "The port is 8123.")
        if not any(m.role == "assistant" for m in request.messages):
            call = ToolCall("f", "WebFetch", {"url": url, "prompt": "Which port?"})
            return reply(request, "", [call])
        return reply(request, "It listens on 8123.")

    async def go() -> str:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("find the port", str(work))
            await op.wait_idle()
            turns = [t.turn for t in await op.journal.loops.turns(started.task_id)]
            (results,) = [t for t in turns if isinstance(t, ResultsTurn)]
            return results.results[0].content

    try:
        told = asyncio.run(go())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert told == "The port is 8123."
    (request,) = asked
    assert "Port is 8123." in request.messages[0].text
    assert request.messages[0].text.endswith("Which port?")


def test_each_call_holds_the_resources_it_declares_through_the_lock_seam(
    tmp_path: Path,
) -> None:
    """Orchestration's locks plug in at `Services.hold`: every loop call is run inside it,
    with what the call declares, sorted: a file shared to read, exclusive to change."""
    import contextlib
    from collections.abc import AsyncIterator

    from pfar.tools.base import Resource

    work = tmp_path / "work"
    work.mkdir()
    held: list[tuple[Resource, ...]] = []
    managers: list[Any] = []  # the kernel's own lock manager, once it is started

    @contextlib.asynccontextmanager
    async def hold(holder: str, resources: tuple[Resource, ...]) -> AsyncIterator[None]:
        held.append(resources)
        async with managers[0].hold(holder, resources):
            yield

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return reply(
                request,
                "",
                [
                    ToolCall("w", "Write", {"file_path": "b.txt", "content": "x"}),
                    ToolCall("r", "Read", {"file_path": "b.txt"}),
                    ToolCall("g", "Glob", {"pattern": "*.txt"}),
                ],
            )
        return reply(request, "done")

    async def main() -> None:
        home = make_home(
            tmp_path / "home",
            config='[loop]\ntools = ["Read", "Write", "Glob"]\n'
            'always_allow = ["Read", "Write", "Glob"]\n',
        )
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            managers.append(kernel.locks)
            kernel.services.hold = hold
            op = Operator(kernel)
            await op.start_loop("write and read", str(work))
            await op.wait_idle()

    asyncio.run(main())
    target = str((work / "b.txt").resolve())
    assert held == [
        (Resource("file", target, "exclusive"),),
        (Resource("file", target, "shared"),),
        (),
    ]
