"""Subtasks killed with SIGKILL: the parent waits in the journal, the child resumes
where it was, and the child's answer reaches the parent exactly once, whichever
commit the kill came after (the spawn, the child's answer, its end, the wake-up)."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path

import pytest

from pfar.journal.store import Store
from pfar.vault.home import Home

from ..support import (
    loop_turns,
    make_home,
    pending_approvals,
    read_journal,
    step_statuses,
    task_states,
    wait_for,
)
from .test_regressions import kernel, lines_of, wait_state

pytestmark = pytest.mark.crash

CONFIG = (
    '[loop]\ntools = ["file.read", "file.write", "shell.run", "Task"]\n'
    'always_allow = ["file.read", "file.write", "shell.run"]\n'
)


def _home(tmp_path: Path, child_call: str) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        f"""
        [[turns]]
        match = "^delegate"
        turn = 1
        text = "Delegating."
        tool_calls = [
          {{ name = "Task", input = {{ description = "child work", prompt = "CHILD: do it" }} }},
        ]

        [[turns]]
        match = "^delegate"
        text = "The subtask said: $last"

        [[turns]]
        match = "^CHILD"
        turn = 1
        tool_calls = [ {child_call} ]

        [[turns]]
        match = "^CHILD"
        text = "child finished: $last"
        """
    )
    return make_home(tmp_path / "home", script=script, config=CONFIG), work


def _tasks(home: Home) -> tuple[str | None, list[str]]:
    """The loop task the owner started, and the subtasks it spawned."""

    async def read(s: Store) -> tuple[str | None, list[str]]:
        for task in await s.tasks.listing(limit=1_000_000):
            if (await s.loops.settings(task.task_id)).parent_task_id is None:
                return task.task_id, await s.loops.children(task.task_id)
        return None, []

    return read_journal(home, read)


WRITE = '{ name = "file.write", input = { path = "b.txt", content = "from child" } }'


@pytest.mark.both_backends
@pytest.mark.parametrize(
    "point",
    [
        "subtask_spawned",  # the child exists, the parent is blocked: nothing ran yet
        "llm_response_received:2",  # the child's first answer is journaled, its call not run
        "step_completed",  # the child's write is done
        "completed",  # the child ended; the parent was not woken before the kill
        "subtask_ended",  # the parent holds the child's answer; its model not yet asked
    ],
)
def test_a_kill_around_a_subtask_resumes_the_child_and_the_parent_gets_its_answer_once(
    tmp_path: Path, point: str
) -> None:
    home, work = _home(tmp_path, WRITE)
    with kernel(home, fault=point) as k:
        with contextlib.suppress(Exception):  # the kernel may die under the call
            k.request("loop", prompt="delegate it", directory=str(work), event_id="e-1")
        assert k.killed_by_fault(), k.output()
    with kernel(home) as k:
        parent, _ = _tasks(home)
        assert parent is not None
        wait_state(home, parent, "WaitingForUser")
    parent, children = _tasks(home)
    assert parent is not None
    (child,) = children  # one child, however often its call was looked at again
    assert (work / "b.txt").read_text() == "from child"
    turns = loop_turns(home, parent)
    assert [t["kind"] for t in turns] == ["user", "assistant", "results", "assistant"]
    (result,) = turns[2]["results"]
    assert not result["is_error"] and result["content"].startswith("child finished")
    assert step_statuses(home, parent) == {0: "completed"}
    assert step_statuses(home, child) == {0: "completed"}
    # every answer asked for once: the parent's two, the child's two
    usage = [read_journal(home, lambda s, t=t: s.tasks.llm_usage(t)) for t in (parent, child)]
    assert [u["calls"] for u in usage] == [2, 2]


@pytest.mark.both_backends
def test_a_child_killed_mid_command_asks_about_it_and_the_parent_gets_the_truth(
    tmp_path: Path,
) -> None:
    log = tmp_path / "effects.log"
    command = json.dumps(f"echo ran >> {log}; sleep 30")
    call = f'{{ name = "shell.run", input = {{ argv = ["sh", "-c", {command}] }} }}'
    home, work = _home(tmp_path, call)
    with kernel(home) as k:
        k.request("loop", prompt="delegate it", directory=str(work))
        wait_for(lambda: lines_of(log) == ["ran"], what="the child's command to start")
        k.kill()  # the child's command may or may not have run; its parent is blocked

    with kernel(home) as k:
        parent, (child,) = _tasks(home)
        assert parent is not None
        wait_state(home, child, "AwaitingApproval")
        assert task_states(home)[parent] == "Blocked"
        (question,) = [q for q in pending_approvals(home) if q.task_id == child]
        assert question.action_type == "write_in_doubt"
        k.request("answer", approval_id=question.approval_id, decision="skip")
        wait_state(home, parent, "WaitingForUser")

    assert lines_of(log) == ["ran"]  # never run again blind
    (result,) = loop_turns(home, parent)[2]["results"]
    # the child was told the truth, and its answer (carrying it) is the parent's result
    assert result["content"].startswith("child finished")
    assert "may or may not have had its effect" in result["content"]
