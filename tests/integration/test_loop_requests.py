"""Every request the loop builds is one the provider's API accepts: an empty answer of
the model, or a lone call of a tool that does not exist, is never sent back as an
assistant message without content (the Messages API refuses it with a 400 and the task
fails). The loopback Anthropic server refuses what the real one refuses, in its words;
the request builders are held to the documented rules of both APIs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

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
from .test_loop_providers import _anthropic, _converse, _state, _turns


def test_the_loopback_server_refuses_what_the_api_refuses() -> None:
    empty = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}]}
    assert anthropic_request_problem(empty) is None  # the optional final assistant message
    empty["messages"].append({"role": "user", "content": "go on"})
    problem = anthropic_request_problem(empty)
    assert problem == (
        "messages.1: all messages must have non-empty content except for the optional final "
        "assistant message"
    )
    twice = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    assert "roles must alternate" in str(anthropic_request_problem(twice))
    unanswered = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x"}]},
            {"role": "user", "content": "b"},
        ]
    }
    assert "`tool_use` ids were found without `tool_result`" in str(
        anthropic_request_problem(unanswered)
    )


def test_an_empty_answer_and_a_lone_unknown_call_keep_the_conversation_valid(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(
            # a lone call of a tool that does not exist: nothing in the answer can run
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(0, "toolu_x", "Nope", ['{"a": 1}']),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(anthropic_stream()),  # an answer with no content at all
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Understood."]))),
        )
        home = _anthropic(tmp_path, server)

        async def reply(kernel: Any, task_id: str) -> None:
            await kernel.send(task_id, "go on")
            await kernel.wait_idle()

        _, task_id, _ = asyncio.run(_converse(home, work, reply))
        bodies = [r.body for r in server.requests]
        left = server.replies.qsize()
    refused = [anthropic_request_problem(b) for b in bodies]
    assert refused == [None, None, None], refused
    assert left == 0
    state, error, _ = _state(home, task_id)
    assert state == "WaitingForUser", error
    # the model was told its call could not be used
    assert "Nope" in json.dumps(bodies[1]["messages"][-1])
    kinds = [t["kind"] for t in _turns(home, task_id)]
    assert kinds == ["user", "assistant", "user", "assistant", "user", "assistant"]


# -- the builders against the documented rules ------------------------------------------------


def _openai_problem(messages: list[dict[str, Any]]) -> str | None:
    """The Chat Completions API's rules for a conversation: an assistant message has
    content or tool calls; every tool call is answered by a `tool` message right after,
    and a `tool` message answers a call of the assistant message before it."""
    open_calls: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg["role"]
        if role == "tool":
            if msg["tool_call_id"] not in open_calls:
                return f"messages.[{i}]: 'tool' must follow a message with 'tool_calls'"
            open_calls.discard(msg["tool_call_id"])
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id': {sorted(open_calls)}"
            )
        if role == "assistant":
            if not msg.get("content") and not msg.get("tool_calls"):
                return f"messages.[{i}]: an assistant message needs content or tool_calls"
            open_calls = {c["id"] for c in msg.get("tool_calls", [])}
        elif role == "user" and not msg["content"]:
            return f"messages.[{i}]: a user message needs content"
    return None


CONVERSATIONS = {
    "an empty answer": (
        Message("user", "hi"),
        Message("assistant", ""),
        Message("user", "go on"),
    ),
    "an answer of whitespace": (
        Message("user", "hi"),
        Message("assistant", " \n"),
        Message("user", "go on"),
    ),
    "calls and their results": (
        Message("user", "hi"),
        Message("assistant", "", tool_calls=(ToolCall("t1", "Read", {"file_path": "a"}),)),
        Message("user", "", tool_results=(ToolResult("t1", "text", is_error=True),)),
    ),
    "an empty message of the owner": (
        Message("user", "hi"),
        Message("assistant", "ok"),
        Message("user", ""),
    ),
}


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_the_request_builders_keep_the_apis_rules(name: str) -> None:
    request = ChatRequest(
        model="m",
        system="s",
        messages=CONVERSATIONS[name],
        tools=(ToolSchema("Read", "read", {"type": "object"}),),
    )
    assert anthropic_request_problem(anthropic_provider.build_params(request)) is None
    assert _openai_problem(openai_provider.build_params(request)["messages"]) is None
