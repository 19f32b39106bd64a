"""A hook's decision survives a SIGKILL: the kernel killed right after a PreToolUse
handler's verdict (a rewritten command) is durable, or right after the step it
changed started, goes on with the same verdict after its restart, never asking the
handler again; the command runs once, as the handler rewrote it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pfar.journal.owner_records import ApprovalRecord
from pfar.journal.records import StepRecord
from pfar.journal.store import Store
from pfar.vault.home import Home

from ..support import make_home, read_journal, task_states, wait_for
from .test_regressions import kernel, lines_of

pytestmark = [pytest.mark.crash, pytest.mark.both_backends]


def _home(tmp_path: Path) -> tuple[Home, Path, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    asked = tmp_path / "asked.log"  # a line each time the handler is asked
    ran = tmp_path / "ran.log"  # a line each time the command runs
    rewrite = json.dumps({"modify": {"input": {"command": f"echo rewritten >> {ran}"}}})
    handler = tmp_path / "rewrite.sh"
    handler.write_text(f"#!/bin/sh\necho asked >> {asked}\necho '{rewrite}'\n")
    handler.chmod(0o700)
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Running it."
        tool_calls = [{{ name = "Bash", input = {{ command = "echo original >> {ran}" }} }}]

        [[turns]]
        text = "Done."
        """
    )
    config = (
        '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n'
        f'[[hooks]]\npoint = "PreToolUse"\ncommand = "{handler}"\n'
    )
    return make_home(tmp_path / "home", script=script, config=config), work, asked, ran


def _state(home: Home) -> str:
    found = list(task_states(home).values())
    return found[0] if found else ""


async def _questions(s: Store) -> list[ApprovalRecord]:
    """Every question of every task, whatever its status."""
    tasks = await s.tasks.listing(limit=1_000_000)
    return [q for t in tasks for q in await s.questions.approvals_for_task(t.task_id)]


async def _steps(s: Store) -> list[StepRecord]:
    """Every journaled step of every task."""
    tasks = await s.tasks.listing(limit=1_000_000)
    return [st for t in tasks for st in await s.tasks.steps(t.task_id)]


@pytest.mark.parametrize("fault", ["hook_verdict", "step_started", "step_completed"])
def test_a_hook_modified_step_replays_after_a_kill(tmp_path: Path, fault: str) -> None:
    home, work, asked, ran = _home(tmp_path)
    with kernel(home, fault=fault) as k:
        k.request("loop", prompt="do it", directory=str(work), once=True, event_id="hooked-1")
        k.proc.wait(timeout=30)  # killed right after the fault point's commit
    assert lines_of(asked) == ["asked"]

    with kernel(home) as k:
        wait_for(lambda: _state(home) in ("Completed", "AwaitingApproval"), timeout=30)
        if _state(home) == "AwaitingApproval":
            # killed after its start was journaled: the owner says whether it ran
            (q,) = read_journal(home, _questions)
            assert q.action_type == "write_in_doubt"
            decision = "skip" if lines_of(ran) else "retry"
            k.request("answer", approval_id=q.approval_id, decision=decision)
            wait_for(lambda: _state(home) == "Completed", timeout=30)
        (step,) = read_journal(home, _steps)
        assert step.args == {"command": f"echo rewritten >> {ran}"}

    assert lines_of(asked) == ["asked"]  # never asked again: the kept verdict was replayed
    assert lines_of(ran) == ["rewritten"]  # the rewritten command, once
