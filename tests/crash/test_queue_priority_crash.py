"""Priority across a SIGKILL: with `max_concurrent = 2`, two low-priority tasks hold both
slots and two high-priority ones wait; the kernel is killed. The next kernel puts every
task it goes on with into the queue before any takes a slot, so the high-priority
tasks start first and the recovered low-priority ones wait their turn (docs/config.md:
"queued again in its turn"), instead of taking the slots again by being listed first."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import make_home, read_journal, step_statuses, tasks_in_order, wait_for
from .test_regressions import kernel

pytestmark = pytest.mark.crash


def _home(tmp_path: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    # the low-priority tasks hold their slots with a long command; the others just answer
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        match = "^low"
        text = "Running it."
        tool_calls = [{ name = "Bash", input = { command = "sleep 60" } }]

        [[turns]]
        text = "Done."
        """
    )
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n[scheduler]\nmax_concurrent = 2\n'
    return make_home(tmp_path / "home", script=script, config=config), work


def _states(home: Home) -> dict[str, str]:
    return {str(t.event_id): str(t.state) for t in tasks_in_order(home)}


def _steps_started(home: Home) -> int:
    return sum(len(step_statuses(home, t.task_id)) for t in tasks_in_order(home))


def _events_after(home: Home, seq: int) -> list[tuple[int, str, str]]:
    """(seq, kind, event id of its task) of every task's bus event after `seq`."""
    events = {t.task_id: str(t.event_id) for t in tasks_in_order(home)}
    found = read_journal(home, lambda s: s.events.bus(seq, limit=1_000_000))
    return [(e.seq, e.kind, events[e.task_id]) for e in found if e.task_id in events]


@pytest.mark.both_backends
def test_after_a_kill_the_higher_priority_tasks_start_first(tmp_path: Path) -> None:
    home, work = _home(tmp_path)
    with kernel(home) as k:
        for name in ("low-1", "low-2"):
            k.request("loop", prompt=name, directory=str(work), priority=-5, event_id=name)
        wait_for(lambda: _steps_started(home) == 2, timeout=30, what="Bash")
        for name in ("high-1", "high-2"):
            k.request(
                "loop", prompt=name, directory=str(work), once=True, priority=10, event_id=name
            )
        wait_for(
            lambda: _states(home).get("high-1") == _states(home).get("high-2") == "Queued",
            timeout=30,
            what="the high-priority tasks queued",
        )
        k.kill()
    before = read_journal(home, lambda s: s.events.bus_last())

    with kernel(home) as k:
        wait_for(
            lambda: all(_states(home).get(n) == "Completed" for n in ("high-1", "high-2")),
            timeout=60,
            what="the high-priority tasks completed",
        )
        # the low-priority tasks' commands were cut off: they park on the owner when
        # their turn comes
        wait_for(
            lambda: all(_states(home).get(n) == "AwaitingApproval" for n in ("low-1", "low-2")),
            timeout=60,
            what="the low-priority tasks parked",
        )
        events = _events_after(home, before)

    def first(kind: str, name: str) -> int:
        return next(seq for seq, k, n in events if k == kind and n == name)

    # the recovered low-priority tasks went back into the queue, and left it only after
    # both high-priority tasks had been let in
    for low in ("low-1", "low-2"):
        assert first("TaskQueued", low) < first("TaskScheduled", low), events
        for high in ("high-1", "high-2"):
            assert first("TaskScheduled", high) < first("TaskScheduled", low), events
    # and no low-priority task moved before the high-priority ones had their slots (what
    # the start decided for each, TaskRecovered, is no move)
    lows_moved = [
        seq
        for seq, k, n in events
        if n.startswith("low") and k not in ("TaskQueued", "TaskRecovered")
    ]
    assert min(lows_moved) > max(first("TaskScheduled", h) for h in ("high-1", "high-2"))
