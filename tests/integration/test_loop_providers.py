"""The agentic loop end to end on real providers: pfar's Anthropic and OpenAI providers
(the official SDKs) talking to loopback servers that speak their wire formats, with
streaming and tool use: parallel calls run and answered by id, thinking kept out of
the conversation, text streamed to a viewer, usage recorded per call, an answer cut
off at its token limit continued, and the error table (an overload retried, a bad
request failing the task with a clear error)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pfar import Home, init_home
from pfar.journal import TaskState
from pfar.kernel.kernel import Kernel
from pfar.llm.events import TextDelta
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..support import vault_db
from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_error_reply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_thinking_block,
    anthropic_tool_use_block,
)
from .openai_server import OpenAIServer, Stream, chunk, text_stream, tool_piece, usage_chunk

LOOP = '[loop]\ntools = ["Read", "Write"]\nalways_allow = ["Read", "Write"]\n'
WRITE = {"file_path": "a.txt", "content": "hi"}
READ = {"file_path": "a.txt"}


def _home(tmp_path: Path, llm: str, secret: tuple[str, str]) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(llm + LOOP)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set(*secret)
    store.close()
    return home


async def _converse(
    home: Home,
    work: Path,
    then: Callable[[Kernel, str], Awaitable[None]] | None = None,
) -> tuple[Kernel, str, list[str]]:
    """Start a loop task, watch its streamed text, let it reach the owner's turn."""
    kernel = Kernel(home)
    await kernel.start()
    streamed: list[str] = []
    try:
        task = await kernel.start_loop(LoopRequest("write and read a.txt", str(work)))
        with kernel.viewers.watching(task.task_id) as queue:
            await kernel.wait_idle()
            while not queue.empty():
                event = queue.get_nowait()
                if isinstance(event, TextDelta):
                    streamed.append(event.text)
        if then is not None:
            await then(kernel, task.task_id)
        return kernel, task.task_id, streamed
    finally:
        await kernel.shutdown()


async def _finish(kernel: Kernel, task_id: str) -> None:
    assert (await kernel.journal.tasks.get(task_id)).state is TaskState.WaitingForUser
    await kernel.send(task_id, "thanks")
    await kernel.wait_idle()
    await kernel.send(task_id, "", done=True)
    await kernel.wait_idle()


def _turns(home: Home, task_id: str) -> list[dict[str, Any]]:

    conn = vault_db(home)
    try:
        rows = conn.execute(
            "SELECT body_json FROM loop_turns WHERE task_id = ? ORDER BY seq", (task_id,)
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def _state(home: Home, task_id: str) -> tuple[str, str | None, dict[str, Any]]:

    conn = vault_db(home)
    try:
        state, error, progress = conn.execute(
            "SELECT state, error, execute_progress FROM task_journal WHERE task_id = ?",
            (task_id,),
        ).fetchone()
        calls = conn.execute(
            "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM llm_calls "
            "WHERE task_id = ?",
            (task_id,),
        ).fetchone()
    finally:
        conn.close()
    info = json.loads(progress or "{}")
    info["calls"], info["input_tokens"], info["output_tokens"] = calls
    return state, error, info


# -- Anthropic -----------------------------------------------------------------------


def _anthropic(tmp_path: Path, server: ScriptedLLMServer) -> Home:
    llm = f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{server.url}"\n'
    llm += "[llm.retry]\noverloaded_wait_seconds = 0.05\n"
    return _home(tmp_path, llm, ("anthropic_api_key", "sk-ant-test-key-4321"))


def test_a_loop_on_anthropic_streams_runs_parallel_calls_and_keeps_thinking_out(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_thinking_block(0, ["secret ", "thoughts"]),
                    anthropic_text_block(1, ["Writing ", "then reading."]),
                    anthropic_tool_use_block(2, "toolu_w", "Write", [json.dumps(WRITE)]),
                    anthropic_tool_use_block(3, "toolu_r", "Read", [json.dumps(READ)]),
                    stop_reason="tool_use",
                    input_tokens=120,
                    output_tokens=40,
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["It ", "says hi."]))),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["You're welcome."]))),
        )
        home = _anthropic(tmp_path, server)
        _, task_id, streamed = asyncio.run(_converse(home, work, _finish))
        bodies = [r.body for r in server.requests]
    assert (work / "a.txt").read_text() == "hi"
    assert "".join(streamed).startswith("Writing then reading.")
    assert "secret thoughts" not in "".join(streamed)
    # the second request: the answer's calls, then both results, matched by id
    assistant, results = bodies[1]["messages"][1], bodies[1]["messages"][2]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert "secret thoughts" not in json.dumps(bodies[1])  # thinking never sent back
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_w", "toolu_r"]
    assert "hi" in json.dumps(results["content"][1])
    assert all(b["stream"] for b in bodies)
    state, error, info = _state(home, task_id)
    assert state == "Completed", error
    assert info["result"] == "You're welcome."
    assert info["calls"] == 3 and info["input_tokens"] >= 120 and info["output_tokens"] >= 40
    kinds = [t["kind"] for t in _turns(home, task_id)]
    assert kinds == ["user", "assistant", "results", "assistant", "user", "assistant"]


def test_an_answer_cut_at_max_tokens_runs_its_complete_call_then_continues(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_text_block(0, ["Writing"]),
                    anthropic_tool_use_block(1, "toolu_w", "Write", [json.dumps(WRITE)]),
                    stop_reason="max_tokens",
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Done after the cut."]))),
        )
        home = _anthropic(tmp_path, server)
        _, task_id, _ = asyncio.run(_converse(home, work))
        bodies = [r.body for r in server.requests]
    assert (work / "a.txt").read_text() == "hi"
    last = bodies[1]["messages"][-1]
    texts = [b.get("text", "") for b in last["content"] if b["type"] == "text"]
    assert any("Continue exactly where you stopped" in t for t in texts)
    assert [b["tool_use_id"] for b in last["content"] if b["type"] == "tool_result"] == ["toolu_w"]
    assert _state(home, task_id)[0] == "WaitingForUser"


def test_an_overload_is_retried_and_a_bad_request_fails_the_task_clearly(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(
            anthropic_error_reply(529, "Overloaded"),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Fine now."]))),
            anthropic_error_reply(400, "messages: roles must alternate"),
        )
        home = _anthropic(tmp_path, server)

        async def then(kernel: Kernel, task_id: str) -> None:
            assert (await kernel.journal.tasks.get(task_id)).state is TaskState.WaitingForUser
            await kernel.send(task_id, "and again")
            await kernel.wait_idle()

        _, task_id, _ = asyncio.run(_converse(home, work, then))
        assert len(server.requests) == 3
    state, error, _ = _state(home, task_id)
    assert state == "Failed"
    assert error is not None and "model call failed" in error and "roles must alternate" in error
    assert "sk-ant-test-key-4321" not in error


# -- OpenAI --------------------------------------------------------------------------


def _calls_stream() -> list[dict[str, Any]]:
    write, read = json.dumps(WRITE), json.dumps(READ)
    return [
        chunk(role="assistant", content="Writing then reading."),
        chunk(tool_calls=[tool_piece(0, id="call_w", name="Write", arguments=write[:10])]),
        chunk(tool_calls=[tool_piece(0, arguments=write[10:])]),
        chunk(tool_calls=[tool_piece(1, id="call_r", name="Read", arguments=read)]),
        chunk(finish="tool_calls"),
        usage_chunk(90, 30),
    ]


def test_a_loop_on_openai_streams_and_answers_each_call_by_id(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    server = OpenAIServer()
    try:
        server.script(
            Stream(_calls_stream()),
            Stream(text_stream("It ", "says hi.")),
            Stream(text_stream("Bye.")),
        )
        llm = f'[llm]\nprovider = "openai"\nmodel = "gpt-test"\nbase_url = "{server.base_url}"\n'
        home = _home(tmp_path, llm, ("openai_api_key", "sk-test-openai-1"))
        _, task_id, streamed = asyncio.run(_converse(home, work, _finish))
        bodies = [r.body for r in server.received]
    finally:
        server.close()
    assert (work / "a.txt").read_text() == "hi"
    assert "".join(streamed).startswith("Writing then reading.")
    messages = bodies[1]["messages"]
    calls = next(m for m in messages if m["role"] == "assistant")["tool_calls"]
    assert [c["id"] for c in calls] == ["call_w", "call_r"]
    tools = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_w", "call_r"]
    assert "hi" in tools[1]["content"]
    state, error, info = _state(home, task_id)
    assert state == "Completed", error
    assert info["result"] == "Bye." and info["calls"] == 3 and info["input_tokens"] >= 90
