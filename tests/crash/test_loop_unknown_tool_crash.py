"""A kernel SIGKILLed right after it journaled an answer whose only call named a tool
that does not exist: started again, it sends that call back with its error result from
the journal (a valid request: the loopback server refuses what the API refuses), never
asks the model for the same answer again, and the loop goes on."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from ..integration.llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)
from ..integration.test_loop_providers import _anthropic
from ..support import loop_turns, task_states
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash


@pytest.mark.both_backends
def test_a_kill_after_a_rejected_call_was_journaled_replays_it_with_its_error(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(0, "toolu_x", "NoSuchTool", ['{"a": 1}']),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Sorry, done."]))),
        )
        home = _anthropic(tmp_path, server)
        with kernel(home, fault="llm_response_received") as k:
            with contextlib.suppress(Exception):  # the kernel may die under the call
                k.request("loop", prompt="go", directory=str(work), event_id="e-1")
            assert k.killed_by_fault(), k.output()
        assert len(server.requests) == 1
        with kernel(home) as k:
            (tid,) = task_states(home)
            wait_state(home, tid, "WaitingForUser")
        bodies = [r.body for r in server.requests]
    assert [anthropic_request_problem(b) for b in bodies] == [None, None]
    call, answer = bodies[1]["messages"][-2:]
    assert call["content"] == [
        {"type": "tool_use", "id": "toolu_x", "name": "NoSuchTool", "input": {"a": 1}}
    ]
    (result,) = [b for b in answer["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_x" and result["is_error"] is True
    assert "unknown tool 'NoSuchTool'" in json.dumps(result["content"])
    kinds = [t["kind"] for t in loop_turns(home, tid)]
    assert kinds == ["user", "assistant", "user", "assistant"]
