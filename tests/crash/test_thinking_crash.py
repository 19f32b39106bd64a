"""A loop task on a thinking tier, its kernel SIGKILLed right after the answer with
thinking was journaled (before its tool call ran): the restarted kernel runs the call
and sends the answer's thinking block back, unchanged, in the next request; the
Anthropic loopback server would refuse the request without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..integration.llm_servers import ScriptedLLMServer, thinking_signature
from ..integration.test_loop_thinking import THOUGHT, carried_back, thinking_home, thinking_replies
from ..support import owner_messages
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash


def test_an_answers_thinking_is_sent_back_after_a_crash(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        home = thinking_home(tmp_path, server)
        server.script(*thinking_replies())
        with kernel(home, fault="llm_response_received") as k:
            tid = str(
                k.request("loop", prompt="write a.txt", directory=str(work), once=True)["task_id"]
            )
            assert k.killed_by_fault()
        assert not (work / "a.txt").exists()  # killed before its call ran
        with kernel(home) as k:
            wait_state(home, tid, "Completed")
            k.terminate()
        bodies = [r.body for r in server.requests]
    assert (work / "a.txt").read_text() == "hi"
    assert len(bodies) == 2  # the answer was not asked for again
    text = "".join(THOUGHT)
    assert carried_back(bodies[1]) == [
        {"type": "thinking", "thinking": text, "signature": thinking_signature(text)}
    ]
    (result,) = [m for m in owner_messages(home) if m["task_id"] == tid and m["kind"] == "result"]
    assert "Let me write" not in result["body"]
