"""Which slots of a cron schedule fire, with the clock as an argument: a new schedule,
a due slot, and each catch-up policy after a downtime (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pfar.runners.schedules import next_slot, plan, slot_event, valid

DAY = timedelta(days=1)
WEEK = timedelta(days=7)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_new_schedule_starts_after_now() -> None:
    due = plan("digest", "0 8 * * *", "UTC", "all", None, at("2026-11-24T12:00"), window=WEEK)
    assert due.fire == () and due.missed == 0
    assert due.last == at("2026-11-24T08:00")  # slots before now are before its time


def test_a_slot_that_just_came_is_due_whatever_the_policy() -> None:
    for policy in ("none", "latest", "all"):
        due = plan(
            "digest",
            "0 8 * * *",
            "UTC",
            policy,  # type: ignore[arg-type]
            at("2026-11-23T08:00"),
            at("2026-11-24T08:00:30"),
            window=WEEK,
        )
        assert due.fire == (at("2026-11-24T08:00"),) and due.missed == 0, policy
        assert due.last == at("2026-11-24T08:00")


def test_nothing_new_fires_nothing() -> None:
    due = plan(
        "digest",
        "0 8 * * *",
        "UTC",
        "all",
        at("2026-11-24T08:00"),
        at("2026-11-24T20:00"),
        window=WEEK,
    )
    assert due.fire == () and due.missed == 0 and due.last == at("2026-11-24T08:00")


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [
        ("none", [], 3),
        ("latest", ["2026-11-24T08:00"], 2),
        ("all", ["2026-11-22T08:00", "2026-11-23T08:00", "2026-11-24T08:00"], 0),
    ],
)
def test_missed_slots_follow_the_catch_up_policy(
    policy: str, fired: list[str], skipped: int
) -> None:
    # down from the 21st's run until the 24th at noon: the 22nd, 23rd and 24th missed
    due = plan(
        "digest",
        "0 8 * * *",
        "UTC",
        policy,  # type: ignore[arg-type]
        at("2026-11-21T08:00"),
        at("2026-11-24T12:00"),
        window=WEEK,
    )
    assert list(due.fire) == [at(f) for f in fired]
    assert due.missed == 3 and due.skipped == skipped
    assert due.last == at("2026-11-24T08:00")  # the position moves past them all


def test_all_catches_up_only_within_the_recovery_window() -> None:
    due = plan(
        "digest",
        "0 8 * * *",
        "UTC",
        "all",
        at("2026-11-10T08:00"),
        at("2026-11-24T12:00"),
        window=timedelta(days=2),
    )
    assert list(due.fire) == [at("2026-11-23T08:00"), at("2026-11-24T08:00")]
    assert due.missed == 14 and due.skipped == 12


def test_latest_with_a_slot_due_now_fires_only_that_one() -> None:
    due = plan(
        "tick",
        "*/5 * * * *",
        "UTC",
        "latest",
        at("2026-11-24T11:00"),
        at("2026-11-24T11:30:10"),
        window=WEEK,
    )
    assert list(due.fire) == [at("2026-11-24T11:30")]
    assert due.missed == 5 and due.skipped == 5


def test_a_time_zone_keeps_local_time_across_daylight_saving() -> None:
    # 08:00 in Berlin is 07:00 UTC in winter and 06:00 UTC in summer (2026-03-29)
    first = next_slot("0 8 * * *", "Europe/Berlin", at("2026-03-28T12:00"))
    second = next_slot("0 8 * * *", "Europe/Berlin", first)
    assert first == at("2026-03-29T06:00") and second == at("2026-03-30T06:00")
    before = next_slot("0 8 * * *", "Europe/Berlin", at("2026-03-27T12:00"))
    assert before == at("2026-03-28T07:00")


def test_a_slot_is_one_event_id_and_bad_expressions_are_refused() -> None:
    assert slot_event("digest", at("2026-11-24T08:00")) == "cron:digest:2026-11-24T08:00:00Z"
    assert valid("0 8 * * 1-5") and valid("*/15 * * * *")
    for bad in ("", "every day", "61 * * * *", "0 25 * * *", "* * * *"):
        assert not valid(bad), bad
