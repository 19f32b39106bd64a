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
from pfar.llm import anthropic_provider, openai_provider
from pfar.llm.messages import ChatRequest, Message, ToolCall, ToolResult, ToolSchema

from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)
from .openai_server import OpenAIServer, Stream, chunk, text_stream, tool_piece, usage_chunk
from .test_loop_providers import _anthropic, _converse, _home, _state
from .test_loop_requests import _openai_problem

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


def test_on_openai_an_unknown_call_is_answered_by_a_tool_message(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    server = OpenAIServer()
    try:
        server.script(
            Stream(
                [
                    chunk(role="assistant"),
                    # a name no tool may have, and arguments that are no JSON
                    chunk(
                        tool_calls=[tool_piece(0, id="call_x", name="no such.tool", arguments="{")]
                    ),
                    chunk(finish="tool_calls"),
                    usage_chunk(20, 5),
                ]
            ),
            Stream(text_stream("Sorry, done.")),
        )
        llm = f'[llm]\nprovider = "openai"\nmodel = "gpt-test"\nbase_url = "{server.base_url}"\n'
        home = _home(tmp_path, llm, ("openai_api_key", "sk-test-openai-1"))
        _, task_id, _ = asyncio.run(_converse(home, work))
        bodies = [r.body for r in server.received]
    finally:
        server.close()
    messages = bodies[1]["messages"]
    assert _openai_problem(messages) is None
    assistant = next(m for m in messages if m["role"] == "assistant")
    call = assistant["tool_calls"][0]
    assert call["id"] == "call_x" and call["function"] == {
        "name": "no_such_tool",
        "arguments": "{}",
    }
    (answer,) = [m for m in messages if m["role"] == "tool"]
    assert answer["tool_call_id"] == "call_x"
    assert "unknown tool 'no such.tool'" in answer["content"] and "Read" in answer["content"]
    state, error, _ = _state(home, task_id)
    assert state == "WaitingForUser", error


def test_the_request_builders_take_a_rejected_call_and_its_error() -> None:
    request = ChatRequest(
        model="m",
        system="s",
        messages=(
            Message("user", "hi"),
            Message("assistant", "", tool_calls=(ToolCall("t1", "NoSuchTool", {}),)),
            Message(
                "user",
                "None of your tool calls could be used.",
                tool_results=(ToolResult("t1", "unknown tool", is_error=True),),
            ),
        ),
        tools=(ToolSchema("Read", "read", {"type": "object"}),),
    )
    assert anthropic_request_problem(anthropic_provider.build_params(request)) is None
    assert _openai_problem(openai_provider.build_params(request)["messages"]) is None
