"""The agentic loop killed with SIGKILL right after each of its journal points, in turn.

One scripted conversation reads, writes, edits and runs a command, with two parallel
tool calls in each of its first two turns, a permission question for the command,
a message from the owner and the end of the task. For every journal point it passes
(and for the first few times each point comes), a kernel is killed right after that
commit; the next kernels take the task to its end, the owner answering what they
ask. Afterwards:

* the conversation is intact: exactly the turns it would have had without a kill,
  each tool call with exactly one result;
* no write was repeated: the command ran once, the file holds what the edit made;
* the model was told the truth: a call cut off is never described as not executed;
* no answer of the model was asked for again once it was journaled.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import (
    loop_turns,
    make_home,
    pending_approvals,
    read_journal,
    task_states,
    wait_for,
)
from .test_regressions import kernel, lines_of

pytestmark = pytest.mark.crash

# every journal point a loop task passes, with how many times this conversation
# passes it (a kill is tried after each of the first few)
POINTS = {
    "task_created": 1,
    "step_started": 3,  # Write, Bash, Edit: writes journal their start
    "step_completed": 4,
    "approval_parked": 1,  # the permission question for Bash
    "approval_decided": 1,
    "tool_results": 2,
    "llm_response_received": 4,
    "user_input": 2,  # the owner's message, then /done (into its summary)
    "completed": 1,
}
CASES = [(p, n) for p, times in POINTS.items() for n in range(1, times + 1)]


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    command = json.dumps(f"echo ran >> {log}")
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Writing the file and running the command."
        tool_calls = [
          {{ name = "Write", input = {{ file_path = "a.txt", content = "one" }} }},
          {{ name = "Bash", input = {{ command = {command} }} }},
        ]

        [[turns]]
        turn = 2
        text = "Editing, then reading back."

        [[turns.tool_calls]]
        name = "Edit"
        input = {{ file_path = "a.txt", old_string = "one", new_string = "two" }}

        [[turns.tool_calls]]
        name = "Read"
        input = {{ file_path = "a.txt" }}

        [[turns]]
        turn = 3
        text = "Done: $last"

        [[turns]]
        text = "You said: $last"
        """
    )
    config = (
        '[loop]\ntools = ["Read", "Write", "Edit", "Bash"]\n'
        'always_allow = ["Read", "Write", "Edit"]\n'
    )
    return make_home(tmp_path / "home", script=script, config=config), work


def _state(home: Home, task_id: str) -> str:
    return task_states(home)[task_id]


def _drive(home: Home, work: Path, log: Path, fault: str | None) -> bool:
    """Run one kernel (killed at `fault`) and move the task on as the owner would; True
    when the task completed under this kernel."""
    with kernel(home, fault=fault) as k:
        try:
            found = list(task_states(home))
            if not found:  # never created, or killed before the commit: ask again
                k.request("loop", prompt="do it", directory=str(work), event_id="sweep-1")
                found = list(task_states(home))
            tid = found[0]
            for _ in range(200):
                state = _state(home, tid)
                if state == "Completed":
                    if fault is not None:  # a kill right after the last commit: let it come
                        with contextlib.suppress(Exception):
                            k.proc.wait(timeout=5)
                    return k.proc.poll() is None
                if state == "AwaitingApproval":
                    (q,) = [q for q in pending_approvals(home) if q.task_id == tid]
                    # a command cut off: the log says whether it ran
                    decision = (
                        ("skip" if lines_of(log) else "retry")
                        if q.action_type == "write_in_doubt"
                        else "approve"
                    )
                    with contextlib.suppress(Exception):  # answered already: fine
                        k.request("answer", approval_id=q.approval_id, decision=decision)
                elif state == "WaitingForUser":
                    owner = [t for t in loop_turns(home, tid) if t.get("source") == "owner"]
                    text = "thanks" if not owner else "/done"
                    with contextlib.suppress(Exception):
                        k.request("send", task_id=tid, text=text)
                # the task moves, or (a loaded machine, a request lost with a dying
                # kernel's socket) the next round looks again and asks again
                with contextlib.suppress(AssertionError):
                    wait_for(
                        lambda s=state: _state(home, tid) != s or k.proc.poll() is not None,
                        timeout=10,
                        what="the task to move",
                    )
                if k.proc.poll() is not None:
                    return False  # killed at the fault: the next kernel goes on
        except Exception:
            if fault is None:
                raise
            with contextlib.suppress(Exception):
                k.proc.wait(timeout=10)  # the connection closed as the kernel died
            if k.proc.poll() is None:
                raise
            return False  # the kernel died under a request
    return False


@pytest.mark.both_backends
@pytest.mark.parametrize(("point", "n"), CASES, ids=[f"{p}:{n}" for p, n in CASES])
def test_a_kill_at_every_loop_journal_point_loses_and_repeats_nothing(
    tmp_path: Path, point: str, n: int
) -> None:
    log = tmp_path / "effects.log"
    home, work = _home(tmp_path, log)
    fault = f"{point}:{n}"
    done = _drive(home, work, log, fault)
    killed = not done  # the faulted kernel died (at its point) before it was stopped
    for _ in range(5):
        if done:
            break
        done = _drive(home, work, log, None)
    assert done, "the task did not complete"
    if not killed:
        pytest.skip(f"{fault} never came in this conversation")

    (tid,) = task_states(home)
    turns = loop_turns(home, tid)
    kinds = [t["kind"] for t in turns]
    assert kinds == [
        "user",
        "assistant",
        "results",
        "assistant",
        "results",
        "assistant",
        "user",
        "assistant",
    ], kinds
    calls = [c["id"] for t in turns if t["kind"] == "assistant" for c in t["calls"]]
    results = [r["call_id"] for t in turns if t["kind"] == "results" for r in t["results"]]
    assert sorted(calls) == sorted(results) and len(set(calls)) == 4  # one result each
    assert lines_of(log) == ["ran"]  # the command ran once
    assert (work / "a.txt").read_text() == "two"
    bash = turns[2]["results"][1]
    assert "not executed" not in bash["content"].lower()
    if bash["is_error"]:  # cut off, skipped: the truth, not "did not run"
        assert "may or may not have had its effect" in bash["content"]
    assert [t["kind"] for t in turns].count("assistant") == 4
    asked = read_journal(home, lambda s: s.tasks.llm_usage(tid))["calls"]
    # every kill comes after a commit, and each answer is journaled in the commit that
    # routes it: no answer is ever asked for twice
    assert asked == 4
