"""The agentic loop killed with SIGKILL: a command cut off mid-run is never run again
blind, never deleted, never described as "not executed". The owner is asked; the
answer is spent by the one run it allows (the kernel is killed before the answer and
during the run it started); and the model is told the truth about the call.
A model's answer committed before a kill is not asked for again."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..support import (
    loop_turns,
    make_home,
    read_journal,
    step_statuses,
    task_approvals,
    task_states,
    wait_for,
)
from .test_regressions import kernel, lines_of, wait_state

pytestmark = pytest.mark.crash


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    command = f"echo ran >> {log}; sleep 30"
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Running the command."
        tool_calls = [
          {{ name = "shell.run", input = {{ argv = ["sh", "-c", {json.dumps(command)}] }} }},
        ]

        [[turns]]
        text = "What I know: $last"
        """
    )
    config = (
        '[loop]\ntools = ["file.read", "file.write", "shell.run"]\n'
        'always_allow = ["file.read", "file.write", "shell.run"]\n'
    )
    return make_home(tmp_path / "home", script=script, config=config), work


def _start(k: Any, work: Path) -> str:
    return str(k.request("loop", prompt="run it", directory=str(work))["task_id"])


@pytest.mark.both_backends
def test_a_command_cut_off_is_asked_about_and_the_model_told_the_truth(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home, work = _home(tmp_path, log)
    with kernel(home) as k:
        tid = _start(k, work)
        wait_for(lambda: lines_of(log) == ["ran"], what="the command to start")
        k.kill()  # before any answer: the command may or may not have run

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (first,) = [q for q in task_approvals(home, tid) if q.status == "pending"]
        assert first.action_type == "write_in_doubt" and first.step == 0
        wait_for(
            lambda: home.owner_log.exists() and "Recovery report" in home.owner_log.read_text(),
            what="the report",
        )
        bodies = [json.loads(line)["body"] for line in home.owner_log.read_text().splitlines()]
        (report,) = [b for b in bodies if "Recovery report" in b]
        assert "resumed at a write in doubt" in report
        assert "run it — at turn 2, tool call 1" in report
        assert lines_of(log) == ["ran"]  # not re-run blind
        k.request("answer", approval_id=first.approval_id, decision="retry")
        wait_for(lambda: len(lines_of(log)) == 2, what="the retried command to start")
        k.kill()  # during the run the retry started

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        pending = [q for q in task_approvals(home, tid) if q.status == "pending"]
        (again,) = pending
        assert again.approval_id != first.approval_id  # a new question, not the old answer
        assert again.action_type == "write_in_doubt"
        assert lines_of(log) == ["ran", "ran"]
        k.request("answer", approval_id=again.approval_id, decision="skip")
        wait_state(home, tid, "WaitingForUser")

    assert lines_of(log) == ["ran", "ran"]
    assert step_statuses(home, tid) == {0: "skipped"}
    turns = loop_turns(home, tid)
    assert [t["kind"] for t in turns] == ["user", "assistant", "results", "assistant"]
    (result,) = turns[2]["results"]
    assert result["is_error"] and "may or may not have had its effect" in result["content"]
    assert "The owner chose not to run it again" in result["content"]
    assert "may or may not have had its effect" in turns[3]["text"]


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["llm_response_received", "tool_results", "task_created"])
def test_a_kill_at_each_loop_checkpoint_loses_no_turn_and_repeats_no_model_answer(
    tmp_path: Path, point: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        text = "Writing."
        tool_calls = [
          { name = "file.write", input = { path = "a.txt", content = "one" } },
          { name = "file.read", input = { path = "a.txt" } },
        ]

        [[turns]]
        text = "Done: $last"
        """
    )
    config = (
        '[loop]\ntools = ["file.read", "file.write"]\nalways_allow = ["file.read", "file.write"]\n'
    )
    home = make_home(tmp_path / "home", script=script, config=config)
    with kernel(home, fault=point) as k:
        with contextlib.suppress(Exception):  # the kernel may die under the call
            k.request("loop", prompt="write", directory=str(work), event_id="e-1")
        assert k.killed_by_fault(), k.output()
    with kernel(home) as k:
        found = list(task_states(home))
        if not found:  # killed before the task's commit: nothing was acknowledged
            k.request("loop", prompt="write", directory=str(work), event_id="e-1")
            found = list(task_states(home))
        tid = found[0]
        wait_state(home, tid, "WaitingForUser")
    turns = loop_turns(home, tid)
    assert [t["kind"] for t in turns] == ["user", "assistant", "results", "assistant"]
    assert [c["step"] for c in turns[1]["calls"]] == [0, 1]
    assert (work / "a.txt").read_text() == "one"
    assert step_statuses(home, tid) == {0: "completed", 1: "completed"}
    assert "one" in turns[3]["text"]
    calls = read_journal(home, lambda s: s.tasks.llm_usage(tid))["calls"]
    assert calls == 2  # each answer asked once: none asked again after the kill
