"""Queued tasks across a SIGKILL: a task waiting for the only slot is journaled Queued;
the kernel is killed (at the commit that queues it, or while it waits); the next
kernel queues it again (never ahead of its turn, never too old for having waited),
says so in its recovery report, and runs it once the slot is free."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import age_task, make_home, read_journal, step_statuses, tasks_in_order, wait_for
from .test_regressions import kernel, minutes_ago

pytestmark = pytest.mark.crash


def _home(tmp_path: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    # the first task holds the only slot with a long command; the second waits for it
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        match = "^first"
        text = "Running it."
        tool_calls = [{ name = "Bash", input = { command = "sleep 60" } }]

        [[turns]]
        text = "Done."
        """
    )
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n[scheduler]\nmax_concurrent = 1\n'
    return make_home(tmp_path / "home", script=script, config=config), work


def _tasks(home: Home) -> dict[str, str]:
    """Each task's id, by the event id that created it."""
    return {str(t.event_id): t.task_id for t in tasks_in_order(home)}


def _states(home: Home) -> dict[str, str]:
    return {str(t.event_id): str(t.state) for t in tasks_in_order(home)}


def _steps_started(home: Home) -> int:
    return sum(len(step_statuses(home, tid)) for tid in _tasks(home).values())


# a task that finds no slot free is created Queued: the kill at its creation's commit
@pytest.mark.both_backends
@pytest.mark.parametrize("fault", [None, "task_created:2"])
def test_a_queued_task_is_queued_again_after_a_kill(tmp_path: Path, fault: str | None) -> None:
    home, work = _home(tmp_path)
    with kernel(home, fault=fault) as k:
        k.request("loop", prompt="first", directory=str(work), event_id="q-first")
        wait_for(lambda: _steps_started(home), timeout=30, what="Bash")
        second = {"prompt": "second", "directory": str(work), "once": True, "event_id": "q-second"}
        if fault is None:
            k.request("loop", **second)
            wait_for(lambda: _states(home).get("q-second") == "Queued", timeout=30)
            k.kill()
        else:
            with contextlib.suppress(Exception):  # killed before it answers
                k.request("loop", **second)
            assert k.killed_by_fault()
    assert _states(home)["q-second"] == "Queued"
    # it waited for the slot far longer than [recovery] max_task_age_seconds (600): a
    # queue's wait is pfar's own, and never makes a task too old to go on
    second = _tasks(home)["q-second"]
    age_task(home, second, minutes_ago(30))

    with kernel(home) as k:
        # the first task's command was cut off: it waits for the owner (holding no slot),
        # and the second runs in its turn
        wait_for(lambda: _states(home).get("q-second") == "Completed", timeout=60)
        # aged, the second is the older and went first: the first parks once it has a slot
        wait_for(lambda: _states(home).get("q-first") == "AwaitingApproval", timeout=30)
        report = (home.owner_log).read_text()
        assert "queued again for a slot" in report
        events = read_journal(home, lambda s: s.events.bus(0, limit=1_000_000))
        kinds = [e.kind for e in events if e.task_id == second]
        assert kinds[:2] == ["TaskCreated", "TaskQueued"]  # it never started before the kill
        assert "TaskScheduled" in kinds and kinds[-1] == "TaskCompleted"
