"""A loop task paused during a command, then SIGKILLed: the recovery report names the
call the crash cut off (which one, and what resuming does with it), not only that a
task was left paused; resuming asks the owner about that call before anything runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import make_home, pending_approvals, pfar, said, task_states, wait_for
from .test_regressions import boot_report, kernel, lines_of, wait_state

pytestmark = pytest.mark.crash


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    command = f"echo ran >> {log}; sleep 60"
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


@pytest.mark.both_backends
def test_a_pause_and_a_crash_report_the_call_cut_off(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home, work = _home(tmp_path, log)
    with kernel(home) as k:
        started = pfar(home, "loop", "run it", "--dir", str(work))
        assert started.returncode == 0, said(started)
        (tid,) = task_states(home)
        wait_for(lambda: lines_of(log) == ["ran"], what="the command to start")
        paused = pfar(home, "pause", tid[:8])
        assert paused.returncode == 0, said(paused)
        assert "will pause when its current step ends" in said(paused)
        k.kill()  # during the command, its pause asked for

    with kernel(home) as k:
        report = " ".join(boot_report(home, k).split())
        wait_state(home, tid, "Paused")
        assert "1 task left paused (run it — at turn 2, tool call 1 (shell.run) was cut off" in (
            report
        ), report
        assert "it may have had its effect" in report
        assert "you are asked to retry, skip or fail it" in report
        resumed = pfar(home, "resume", tid[:8])
        assert resumed.returncode == 0, said(resumed)
        wait_state(home, tid, "AwaitingApproval")  # asked about the call: never re-run blind
        (question,) = [q for q in pending_approvals(home) if q.task_id == tid]
        assert question.action_type == "write_in_doubt"
    assert lines_of(log) == ["ran"]
