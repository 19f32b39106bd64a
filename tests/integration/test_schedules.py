"""Cron templates through a real kernel: a new schedule starts after now, slots missed
while pfar was down are caught up by the template's policy and named in the recovery
report, a bad expression or time zone is refused naming the field, and a slot makes
one task however many kernels look at it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pfar.config import Config
from pfar.journal.records import parse_rfc3339
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault.home import Home

from ..support import make_home, vault_db

SCRIPT = """
[[responses]]
phase = "plan"
json = { steps = [] }

[[responses]]
phase = "synthesize"
text = "ticked"
"""


def tick(catch_up: str = "latest", cron: str = "* * * * *") -> str:
    return f"""
id = "tick"
description = "A scheduled tick"
trigger = "cron:{cron}"
allowed_tools = ["file.read"]

[schedule]
timezone = "Europe/Berlin"
catch_up = "{catch_up}"
input = "tick tock"
"""


def seed_position(home: Home, template: str, last: datetime) -> None:
    """As if a kernel had last looked at `template`'s schedule at `last`."""
    with contextlib.closing(vault_db(home)) as conn, conn:
        conn.execute(
            "INSERT INTO adapter_state(adapter, state_json, updated_at) VALUES (?, ?, ?)",
            (
                f"schedule:{template}",
                json.dumps({"last_slot": last.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}),
                last.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            ),
        )


def minutes_ago(n: int) -> datetime:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=n)


async def _settled(kernel: Kernel) -> None:
    """Until the scheduler has fired what was due and moved every position past it."""
    for _ in range(1000):
        plans = await kernel.scheduler.plans()
        saved = [await kernel.journal.adapters.get(f"schedule:{d.template_id}") for d in plans]
        if all(
            not d.fire and s and parse_rfc3339(s["last_slot"]) == d.last
            for d, s in zip(plans, saved, strict=True)
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the scheduler did not settle")


async def _run(home: Home) -> tuple[Any, list[Any]]:
    kernel = Kernel(home, Config.load(home.config))
    report = await kernel.start()
    try:
        await _settled(kernel)  # the scheduler's first round runs at start
        await kernel.wait_idle()
        tasks = await Operator(kernel).tasks()
    finally:
        await kernel.shutdown()
    return report, tasks


def test_a_new_schedule_starts_after_now(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"tick": tick("all")}, script=SCRIPT)
    report, tasks = asyncio.run(_run(home))
    assert tasks == [] and not report.schedules
    with contextlib.closing(vault_db(home)) as conn:
        (state,) = conn.execute(
            "SELECT state_json FROM adapter_state WHERE adapter = 'schedule:tick'"
        ).fetchone()
    assert "last_slot" in json.loads(state)


def test_pfar_queue_shows_each_schedules_next_slot(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"tick": tick(cron="0 7 * * *")}, script=SCRIPT)

    async def look() -> list[Any]:
        kernel = Kernel(home, Config.load(home.config))
        await kernel.start()
        try:
            return await Operator(kernel).queue()
        finally:
            await kernel.shutdown()

    (waiting,) = asyncio.run(look())
    assert waiting.task_id == "" and waiting.position == 0
    assert waiting.reason.startswith("schedule: tick next runs at ")
    assert waiting.reason.endswith(" 07:00 Europe/Berlin")
    assert parse_rfc3339(waiting.since) > datetime.now(UTC)


def test_missed_slots_are_caught_up_once_and_reported(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"tick": tick("latest")}, script=SCRIPT)
    seed_position(home, "tick", minutes_ago(10))
    report, tasks = asyncio.run(_run(home))
    assert len(tasks) == 1, tasks  # the latest of them, once
    (line,) = report.schedules
    assert line.startswith("tick: ") and "missed" in line and "skipped (catch_up = latest)" in line
    if "caught up" in line:  # (a slot due just now fires as due, not as caught up)
        assert "Europe/Berlin" in line
    assert "schedule tick:" in report.render()
    # a second kernel finds the position moved: nothing fires again for those slots
    report, again = asyncio.run(_run(home))
    assert {t.task_id for t in tasks} <= {t.task_id for t in again}
    assert len(again) - len(tasks) <= 1  # at most a slot that came during this run
    assert not report.schedules


def test_catch_up_all_and_none(tmp_path: Path) -> None:
    every = make_home(tmp_path / "all", templates={"tick": tick("all")}, script=SCRIPT)
    seed_position(every, "tick", minutes_ago(5))
    _, tasks = asyncio.run(_run(every))
    assert 4 <= len(tasks) <= 6  # one a minute since the seeded slot
    ids = set()
    with contextlib.closing(vault_db(every)) as conn:
        ids = {r[0] for r in conn.execute("SELECT event_id FROM task_journal")}
    assert all(i.startswith("cron:tick:") for i in ids) and len(ids) == len(tasks)
    skip = make_home(tmp_path / "none", templates={"tick": tick("none")}, script=SCRIPT)
    seed_position(skip, "tick", minutes_ago(5))
    report, tasks = asyncio.run(_run(skip))
    assert len(tasks) <= 1  # only a slot that came in the last 90 s
    assert "skipped (catch_up = none)" in report.schedules[0]


def test_a_bad_cron_expression_or_time_zone_is_refused_by_name(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        templates={
            "tick": tick(cron="every morning"),
            "tock": tick()
            .replace('id = "tick"', 'id = "tock"')
            .replace("Europe/Berlin", "Mars/Olympus"),
        },
        script=SCRIPT,
    )

    async def errors() -> str:
        kernel = Kernel(home, Config.load(home.config))
        await kernel.start()
        try:
            return "\n".join(str(problem) for e in kernel.template_errors for problem in e.each)
        finally:
            await kernel.shutdown()

    said = asyncio.run(errors())
    assert "tick.toml" in said and "trigger" in said, said
    assert "'every morning' is not a cron expression" in said, said
    assert "tock.toml" in said and "schedule.timezone" in said, said
    assert "'Mars/Olympus' is not a time zone name" in said, said
