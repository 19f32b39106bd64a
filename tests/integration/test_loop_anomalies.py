"""Layer 3 (anomaly checks) through a real kernel: a host never reached before and a burst
of writes are warned about once and the task goes on; with `action = "ask"` the call
waits for the owner, also when its question is looked at again after a SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfar.journal import TaskState
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..crash.test_regressions import kernel, rows, wait_state
from ..support import make_home

# the site is on loopback, which a loop's WebFetch reaches only when allowed
LOOPBACK = '[loop.policy]\nallowed_private_hosts = ["127.0.0.1"]\n'


@contextlib.contextmanager
def _site() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body><p>hello from the site</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page"
    finally:
        server.shutdown()
        server.server_close()


def _fetching(url: str) -> Callable[[ChatRequest], ChatResponse]:
    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return reply(request, "", [ToolCall("f", "WebFetch", {"url": url})])
        return reply(request, "fetched: " + request.messages[-1].tool_results[0].content)

    return model


async def _warnings(op: Operator, task_id: str) -> list[str]:
    return [m["body"] for m in await op.journal.events.for_task(task_id) if "unusual" in m["body"]]


def _home(tmp_path: Path, extra: str = "") -> Any:
    config = (
        '[loop]\ntools = ["WebFetch", "Write"]\nalways_allow = ["WebFetch", "Write"]\n'
        f"{LOOPBACK}{extra}"
    )
    return make_home(tmp_path / "home", config=config)


def test_a_host_never_reached_before_is_warned_about_once_and_the_task_goes_on(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _site() as url:

        async def main() -> None:
            async with open_kernel(_home(tmp_path), model=ScriptedChatModel(_fetching(url))) as k:
                op = Operator(k)
                first = await op.start_loop("fetch it", str(work))
                await op.wait_idle()
                assert (await op.task(first.task_id)).state is TaskState.WaitingForUser
                (warning,) = await _warnings(op, first.task_id)
                assert "127.0.0.1 is a host no task has reached before" in warning
                assert "It goes on" in warning
                turns = await op.journal.loops.turns(first.task_id)
                assert "hello from the site" in str(turns[-1].turn)
                # a later task reaching the same host is nothing unusual
                second = await op.start_loop("fetch it again", str(work))
                await op.wait_idle()
                assert await _warnings(op, second.task_id) == []

        asyncio.run(main())


def test_a_burst_of_writes_is_warned_about(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            calls = [
                ToolCall(f"w{i}", "Write", {"file_path": f"f{i}.txt", "content": str(i)})
                for i in range(3)
            ]
            return reply(request, "", calls)
        return reply(request, "wrote three")

    async def main() -> None:
        home = _home(tmp_path, "[loop.anomaly]\nmax_writes_per_minute = 2\n")
        async with open_kernel(home, model=ScriptedChatModel(model)) as k:
            op = Operator(k)
            task = await op.start_loop("write three", str(work))
            await op.wait_idle()
            assert (await op.task(task.task_id)).state is TaskState.WaitingForUser
            (warning,) = await _warnings(op, task.task_id)
            assert "tool call 3 (Write)" in warning
            assert "2 writes started in the last minute (limit 2" in warning
            assert sorted(p.name for p in work.iterdir()) == ["f0.txt", "f1.txt", "f2.txt"]

    asyncio.run(main())


def test_with_action_ask_an_unusual_call_waits_for_the_owner(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _site() as url:

        async def main() -> None:
            home = _home(tmp_path, '[loop.anomaly]\naction = "ask"\n')
            async with open_kernel(home, model=ScriptedChatModel(_fetching(url))) as k:
                op = Operator(k)
                task = await op.start_loop("fetch it", str(work))
                await op.wait_idle()
                assert (await op.task(task.task_id)).state is TaskState.AwaitingApproval
                (question,) = (await op.questions()).approvals
                assert question.description.startswith("Allow WebFetch: 127.0.0.1? It is unusual")
                await op.answer(question.approval_id, "approve")
                await op.wait_idle()
                assert (await op.task(task.task_id)).state is TaskState.WaitingForUser
                assert "It waits for your answer" in (await _warnings(op, task.task_id))[0]

        asyncio.run(main())


@pytest.mark.crash
def test_an_unusual_call_asked_about_is_asked_about_again_after_a_kill(tmp_path: Path) -> None:
    """Killed right after the anomaly was recorded (the host is now "seen"): the call is
    still unusual on restart, its question comes, and the warning is not sent twice."""
    work = tmp_path / "work"
    work.mkdir()
    with _site() as url:
        script = textwrap.dedent(
            f"""
            [[turns]]
            turn = 1
            tool_calls = [ {{ name = "WebFetch", input = {{ url = "{url}" }} }} ]

            [[turns]]
            text = "fetched: $last"
            """
        )
        config = (
            '[loop]\ntools = ["WebFetch"]\nalways_allow = ["WebFetch"]\n'
            f'{LOOPBACK}[loop.anomaly]\naction = "ask"\n'
        )
        home = make_home(tmp_path / "home", script=script, config=config)
        with kernel(home, fault="loop_anomaly") as k:
            with contextlib.suppress(Exception):
                k.request("loop", prompt="fetch", directory=str(work))
            assert k.killed_by_fault(), k.output()
        with kernel(home) as k:
            (task,) = rows(home, "SELECT task_id FROM task_journal")
            tid = task["task_id"]
            wait_state(home, tid, "AwaitingApproval")
            (question,) = rows(
                home,
                "SELECT approval_id, description FROM pending_approvals WHERE status = 'pending'",
            )
            assert "It is unusual" in question["description"]
            k.request("answer", approval_id=question["approval_id"], decision="approve")
            wait_state(home, tid, "WaitingForUser")
        warnings = rows(
            home, "SELECT count(*) AS n FROM owner_outbox WHERE message_key LIKE 'anomaly:%'"
        )
        assert warnings[0]["n"] == 1
