"""Pausing a loop task while its model has the turn, through the real `pfar` command and
a real kernel whose model (a loopback Anthropic server) is held mid-answer: the model's
turn is a boundary, so the task ends Paused (never waiting for the owner with the pause
dropped), none of the answer's calls runs before the owner resumes, and `task show`
tells of the pause and the resume."""

from __future__ import annotations

import json
from pathlib import Path

from pfar.vault.home import Home

from ..support import pfar, running_kernel, said, task_states, wait_for
from .llm_servers import (
    Gate,
    ScriptedLLMServer,
    SSEReply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)
from .test_loop_providers import WRITE, _anthropic, _turns


def _state(home: Home, task_id: str, state: str) -> None:
    wait_for(lambda: task_states(home).get(task_id) == state, what=f"the task to be {state}")


def _pause_while_answering(home: Home, server: ScriptedLLMServer, gate: Gate, work: Path) -> str:
    """Start the task, pause it while its model's answer is held, then let the answer go."""
    started = pfar(home, "loop", "write a.txt", "--dir", str(work))
    assert started.returncode == 0, said(started)
    task_id = next(t for t in task_states(home))
    wait_for(lambda: len(server.requests) == 1, what="the model to be asked")
    paused = pfar(home, "send", task_id[:8], "/pause")
    assert paused.returncode == 0, said(paused)
    assert "will pause" in said(paused)
    gate.open()
    _state(home, task_id, "Paused")
    return task_id


def test_a_pause_while_the_model_ends_its_turn_pauses_and_resume_works(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    gate = Gate(after=3, timeout=60)
    with ScriptedLLMServer() as server:
        server.script(SSEReply(anthropic_stream(anthropic_text_block(0, ["All done."])), gate=gate))
        home = _anthropic(tmp_path, server)
        with running_kernel(home):
            task_id = _pause_while_answering(home, server, gate, work)
            refused = pfar(home, "send", task_id[:8], "more")  # paused: not the owner's turn
            assert refused.returncode != 0
            resumed = pfar(home, "send", task_id[:8], "/resume")
            assert resumed.returncode == 0, said(resumed)
            _state(home, task_id, "WaitingForUser")
            shown = said(pfar(home, "task", "show", task_id[:8]))
        assert len(server.requests) == 1  # the answer was routed, not asked for again
    assert "paused (from Executing)" in shown and "resumed (Executing)" in shown, shown
    kinds = [t["kind"] for t in _turns(home, task_id)]
    assert kinds == ["user", "assistant"]


def test_a_pause_while_the_model_answers_parks_before_its_call_runs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    gate = Gate(after=3, timeout=60)
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_text_block(0, ["Writing."]),
                    anthropic_tool_use_block(1, "toolu_w", "Write", [json.dumps(WRITE)]),
                    stop_reason="tool_use",
                ),
                gate=gate,
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Wrote it."]))),
        )
        home = _anthropic(tmp_path, server)
        with running_kernel(home):
            task_id = _pause_while_answering(home, server, gate, work)
            assert not (work / "a.txt").exists()  # the answer's call did not run
            resumed = pfar(home, "resume", task_id[:8])
            assert resumed.returncode == 0, said(resumed)
            _state(home, task_id, "WaitingForUser")
            shown = said(pfar(home, "task", "show", task_id[:8]))
    assert (work / "a.txt").read_text() == "hi"
    assert "paused (from Executing)" in shown and "resumed (Executing)" in shown, shown
