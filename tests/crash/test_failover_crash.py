"""A kernel SIGKILLed while a failed-over call streams its answer from the fallback
provider: started again, its breakers are closed (memory only, reset at start), so the
request made again goes to the primary first, which answers now. The tools the
fallback's earlier answer called ran once, the killed call left no `llm_calls` row, and
the owner was told once that the primary went down."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from ..integration.llm_servers import (
    Gate,
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    failing,
)
from ..integration.openai_server import OpenAIServer, Stream, text_stream
from ..integration.test_provider_failover import (
    calls_made,
    calls_stream,
    failover_home,
    owner_notices,
)
from ..support import loop_turns, task_states, wait_for
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash


def test_a_kill_during_a_failed_over_call_makes_it_again_on_the_primary(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    held = Gate(after=1, timeout=30)
    backup = OpenAIServer()
    try:
        with ScriptedLLMServer() as primary:
            primary.script(*failing(2, 529, "Overloaded"))  # the first call: down
            backup.script(
                Stream(calls_stream()),
                Stream(text_stream("Half of an ", "answer."), gate=held),
            )
            home = failover_home(tmp_path, primary.url, backup.base_url, failures=1)
            with kernel(home) as k:
                with contextlib.suppress(Exception):
                    k.request("loop", prompt="write and read a.txt", directory=str(work))
                # the second call went straight to the fallback (the breaker is open),
                # which has begun to answer: the kernel dies under it
                wait_for(lambda: len(backup.received) == 2, what="the failed-over call")
                k.kill()
            held.open()
            assert len(primary.requests) == 2
            primary.script(SSEReply(anthropic_stream(anthropic_text_block(0, ["All done."]))))
            with kernel(home):
                (task_id,) = task_states(home)
                wait_state(home, task_id, "WaitingForUser")
            again = primary.requests[2].body
    finally:
        backup.close()
    # the request made again went to the primary, with the tools' results (run once)
    assert anthropic_request_problem(again) is None
    results = again["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in results if b["type"] == "tool_result"] == [
        "call_w",
        "call_r",
    ]
    assert (work / "a.txt").read_text() == "hi"
    kinds = [t["kind"] for t in loop_turns(home, task_id)]
    assert kinds == ["user", "assistant", "results", "assistant"]
    assert loop_turns(home, task_id)[-1]["text"] == "All done."
    assert calls_made(home, task_id) == [("backup", "gpt-test"), ("anthropic", "claude-test")]
    (down,) = owner_notices(home)  # the second life found the primary up: nothing to tell
    assert "'anthropic' is down" in down
