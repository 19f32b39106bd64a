"""A command a crash cut off and the owner chose to run again: the model is told that
the first run was cut off and may have had its effect, then the output of the run
that finished (the kernel killed before the owner's answer and after it)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..support import loop_turns, make_home, pending_approvals, pfar, said, step_statuses, wait_for
from .test_regressions import kernel, lines_of, wait_state

pytestmark = pytest.mark.crash


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    # the first run hangs (and is killed); the second finishes, saying which run it was
    command = f'echo ran >> {log}; n=$(wc -l < {log}); [ "$n" -ge 2 ] || sleep 60; echo "run $n"'
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Running the command."
        tool_calls = [
          {{ name = "shell.run", input = {{ argv = ["sh", "-c", {json.dumps(command)}] }} }},
        ]

        [[turns]]
        text = "Done."
        """
    )
    config = '[loop]\ntools = ["shell.run"]\nalways_allow = ["shell.run"]\n'
    return make_home(tmp_path / "home", script=script, config=config), work


def _results(home: Home, task_id: str) -> list[dict[str, Any]]:
    turns = loop_turns(home, task_id)
    return [r for t in turns if t["kind"] == "results" for r in t["results"]]


@pytest.mark.both_backends
def test_a_retried_command_tells_the_model_its_first_run_was_cut_off(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home, work = _home(tmp_path, log)
    with kernel(home) as k:
        tid = str(k.request("loop", prompt="run it", directory=str(work))["task_id"])
        wait_for(lambda: lines_of(log) == ["ran"], what="the command to start")
        k.kill()  # during the command: it may or may not have had its effect

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        k.kill()  # before the owner's answer

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (question,) = [q for q in pending_approvals(home) if q.task_id == tid]
        assert question.action_type == "write_in_doubt" and question.step == 0
        answered = pfar(home, "answer", question.approval_id[:8], "retry")
        assert answered.returncode == 0, said(answered)
        wait_state(home, tid, "WaitingForUser")
        k.kill()  # after the answer and the run it allowed

    with kernel(home) as k:
        wait_state(home, tid, "WaitingForUser")
    assert lines_of(log) == ["ran", "ran"]  # the command did run twice
    assert step_statuses(home, tid) == {0: "completed"}
    (result,) = _results(home, tid)
    assert not result["is_error"]
    content = result["content"]
    assert "an earlier run was cut off by a crash" in content
    assert "it may have had its effect" in content
    assert content.index("cut off") < content.index("run 2")  # the note, then the output
    assert content.endswith('"stdout": "run 2\\n"}')  # the second run's output, whole
