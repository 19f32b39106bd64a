"""A loop task on a thinking tier, its kernel SIGKILLed right after the answer with
thinking was journaled (before its tool call ran): the restarted kernel runs the call
and sends the answer's thinking block back, unchanged, in the next request; the
Anthropic loopback server would refuse the request without it. And a tier escalated
after such a kill is asked without the other model's thinking."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..integration import test_thinking_exchanges as exchanges
from ..integration.llm_servers import (
    ScriptedLLMServer,
    anthropic_request_problem,
    thinking_signature,
)
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


def test_a_tier_escalated_after_a_crash_is_asked_without_the_other_models_thinking(
    tmp_path: Path,
) -> None:
    """Killed right after the worker's answer (thinking, and a call that fails) was
    journaled: the restarted kernel runs the call, escalates to the planner, and asks
    it without thinking, as the kernel that was killed would have (the answer's turn
    records the model its request named); the task finishes."""
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        home = exchanges._home(
            tmp_path,
            f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{server.url}"\n'
            f"[llm.tiers.worker]\n{exchanges.THINKS}"
            f'[llm.tiers.planner]\nmodel = "claude-big"\n{exchanges.THINKS}',
            loop="escalate_after_failures = 1\n",
        )
        server.script(exchanges._thinks_and_reads("claude-test"), exchanges._done("claude-big"))
        with kernel(home, fault="llm_response_received") as k:
            tid = str(
                k.request("loop", prompt="read no.txt", directory=str(work), once=True)["task_id"]
            )
            assert k.killed_by_fault()
        with kernel(home) as k:
            wait_state(home, tid, "Completed")
            k.terminate()
        bodies = [r.body for r in server.requests]
    assert [b["model"] for b in bodies] == ["claude-test", "claude-big"]  # none asked again
    assert [anthropic_request_problem(b) for b in bodies] == [None, None]
    assert "thinking" not in bodies[1] and carried_back(bodies[1]) == []
