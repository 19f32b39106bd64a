"""A call of a tool that does not exist stays in the conversation: the next request holds
the model's tool_use and, in the user message after it, a tool_result with is_error
saying the tool does not exist and naming the tools that do. A kernel started again
sends the same conversation from the journal. Every request is one the loopback
Anthropic server (which refuses what the API refuses) accepts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pfar.kernel.kernel import Kernel

from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)
from .test_loop_providers import _anthropic, _converse, _state

READ = {"file_path": "a.txt"}


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _answered_by_error(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The is_error tool_result that answers the model's `call_id`, right after its call."""
    messages = body["messages"]
    for i, msg in enumerate(messages):
        if msg["role"] == "assistant" and any(b["id"] == call_id for b in _blocks(msg, "tool_use")):
            results = [b for b in _blocks(messages[i + 1], "tool_result")]
            (result,) = [r for r in results if r["tool_use_id"] == call_id]
            assert result.get("is_error") is True, result
            return result
    raise AssertionError(f"no tool_use {call_id} in {json.dumps(messages)}")


def test_a_call_of_an_unknown_tool_is_answered_by_its_error_and_the_loop_goes_on(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hi\n")
    with ScriptedLLMServer() as server:
        server.script(
            # a lone call of a tool that does not exist
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(0, "toolu_x", "NoSuchTool", ['{"a": 1}']),
                    stop_reason="tool_use",
                )
            ),
            # the model goes on: a real call next to another unknown one
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(0, "toolu_r", "Read", [json.dumps(READ)]),
                    anthropic_tool_use_block(1, "toolu_y", "AlsoMissing", ["{}"]),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["It says hi."]))),
            # after the restart, the owner's message
            SSEReply(anthropic_stream(anthropic_text_block(0, ["You're welcome."]))),
        )
        home = _anthropic(tmp_path, server)
        _, task_id, _ = asyncio.run(_converse(home, work))
        state, error, _ = _state(home, task_id)
        assert state == "WaitingForUser", error

        async def again() -> None:
            kernel = Kernel(home)
            await kernel.start()
            try:
                await kernel.send(task_id, "thanks")
                await kernel.wait_idle()
            finally:
                await kernel.shutdown()

        asyncio.run(again())
        bodies = [r.body for r in server.requests]
        left = server.replies.qsize()
    assert left == 0
    assert [anthropic_request_problem(b) for b in bodies] == [None] * 4
    # the model's own call is sent back, answered by its error naming the tools there are
    error = _answered_by_error(bodies[1], "toolu_x")
    assert "unknown tool 'NoSuchTool'" in str(error["content"])
    assert "Read" in str(error["content"])
    call = _blocks(bodies[1]["messages"][-2], "tool_use")
    assert call == [{"type": "tool_use", "id": "toolu_x", "name": "NoSuchTool", "input": {"a": 1}}]
    # a real call next to an unknown one: both answered in the same user message
    results = _blocks(bodies[2]["messages"][-1], "tool_result")
    assert {r["tool_use_id"] for r in results} == {"toolu_r", "toolu_y"}
    read = next(r for r in results if r["tool_use_id"] == "toolu_r")
    assert "hi" in str(read["content"]) and not read.get("is_error")
    assert "unknown tool 'AlsoMissing'" in str(_answered_by_error(bodies[2], "toolu_y")["content"])
    # a kernel started again sends the same conversation, read back from the journal
    assert bodies[3]["messages"][: len(bodies[2]["messages"])] == bodies[2]["messages"]
    state, error, _ = _state(home, task_id)
    assert state == "WaitingForUser", error
