"""Cron slots across SIGKILLs of a real kernel process: killed after a slot's task was
created (before the next, or before the schedule's position moved) and after the
position moved; every slot makes exactly one task."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..integration.test_schedules import SCRIPT, minutes_ago, seed_position, tick
from ..support import KernelProcess, make_home, wait_for
from .test_regressions import kernel, rows

pytestmark = pytest.mark.crash


def _slots(home: Home) -> list[str]:
    return [r["event_id"] for r in rows(home, "SELECT event_id FROM task_journal")]


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
            lambda: (
                rows(home, "SELECT count(*) AS n FROM task_journal WHERE state != 'Completed'")[0][
                    "n"
                ]
                == 0
            ),
            what="every slot's task completed",
        )
    slots = _slots(home)
    assert len(slots) == len(set(slots)), slots  # no slot twice
    assert set(before) <= set(slots)
    assert all(s.startswith("cron:tick:") for s in slots)
    assert 3 <= len(slots) <= 5, slots  # one a minute since the seeded slot, none lost
