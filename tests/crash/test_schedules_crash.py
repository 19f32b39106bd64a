"""Cron slots across SIGKILLs of a real kernel process: killed after a slot's task was
created (before the next, or before the schedule's position moved) and after the
position moved; every slot makes exactly one task."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pfar.journal.records import TaskRecord
from pfar.vault.home import Home

from ..integration.test_schedules import SCRIPT, minutes_ago, tick
from ..support import KernelProcess, make_home, read_journal, task_states, wait_for, write_journal
from .test_regressions import kernel

# every test here runs on each journal backend
pytestmark = [pytest.mark.crash, pytest.mark.both_backends]


def _slots(home: Home) -> list[str]:
    listed = read_journal(home, lambda s: s.tasks.listing(limit=1000))
    assert all(isinstance(t, TaskRecord) for t in listed), listed
    return [str(t.event_id) for t in listed if isinstance(t, TaskRecord)]


def seed_position(home: Home, template: str, last: datetime) -> None:
    """As if a kernel had last looked at `template`'s schedule at `last`."""
    state = {"last_slot": last.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    write_journal(home, lambda s: s.adapters.put(f"schedule:{template}", state))


@pytest.mark.parametrize("point", ["task_created", "task_created:2", "adapter_position"])
def test_every_slot_fires_once_whichever_commit_the_kill_came_after(
    tmp_path: Path, point: str
) -> None:
    home = make_home(tmp_path / "home", templates={"tick": tick("all")}, script=SCRIPT)
    seed_position(home, "tick", minutes_ago(3))
    assert KernelProcess(home, fault=point).killed_by_fault()
    before = _slots(home)
    assert before, "the kill came after a slot's task"
    with kernel(home) as k:
        k.request("wait_idle")
        wait_for(
            lambda: set(task_states(home).values()) == {"Completed"},
            what="every slot's task completed",
        )
    slots = _slots(home)
    assert len(slots) == len(set(slots)), slots  # no slot twice
    assert set(before) <= set(slots)
    assert all(s.startswith("cron:tick:") for s in slots)
    assert 3 <= len(slots) <= 5, slots  # one a minute since the seeded slot, none lost
