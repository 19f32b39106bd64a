"""A start's recovery report as its boot keeps it: the text the owner was sent, each
line with its tasks, read back whole, and what cannot be read said so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pfar.journal.boot_reports import (
    MAX_LINKED,
    ReportLineKind,
    StoredReport,
    UnreadableReport,
    dumps,
    parse,
)
from pfar.recovery.report import RecoveryReport

ID = st.uuids().map(str)
IDS = st.lists(ID, max_size=7, unique=True)


@st.composite
def reports(draw: st.DrawFn) -> RecoveryReport:
    return RecoveryReport(
        retried=draw(IDS),
        resumed=draw(IDS),
        asked=draw(IDS),
        parked=draw(st.dictionaries(ID, st.integers(2, 4), max_size=4)),
        abandoned=draw(IDS),
        paused=draw(IDS),
        malformed=draw(st.dictionaries(ID, st.just("state: no state"), max_size=2)),
        orphan_processes=draw(st.integers(0, 3)),
        schedules=draw(st.lists(st.just("daily: 1 slot caught up"), max_size=2)),
        vault=draw(st.lists(st.just("restored from a backup"), max_size=1)),
    )


@given(reports())
def test_the_kept_report_is_the_text_sent_line_by_line_with_its_tasks(
    report: RecoveryReport,
) -> None:
    kept = report.stored()
    assert kept.text == report.render()
    if not report.empty:
        assert kept.text.splitlines()[1:] == [f" - {line.text}" for line in kept.lines]
    said = {line.kind: set() for line in kept.lines}
    for line in kept.lines:
        said[line.kind] |= set(line.task_ids)
    assert said.get(ReportLineKind.retried, set()) == set(report.retried)
    assert said.get(ReportLineKind.asked, set()) == set(report.asked)
    assert said.get(ReportLineKind.parked, set()) == set(report.parked)
    assert said.get(ReportLineKind.abandoned, set()) == set(report.abandoned)
    assert said.get(ReportLineKind.malformed, set()) == set(report.malformed)
    assert parse(dumps(kept)) == kept


def test_a_report_this_pfar_cannot_read_is_said_so_never_raised() -> None:
    assert parse(None) is None
    for odd, where in [
        ("not json", "the report"),
        ('{"form": "report", "text": "x", "lines": [{"kind": "teleported", "text": "y"}]}', "kind"),
        ('{"form": "report", "text": "x", "lines": [], "later": 1}', "later"),
        ("[]", "the report"),
    ]:
        got = parse(odd)
        assert isinstance(got, UnreadableReport), odd
        assert where in got.problem, (odd, got.problem)


def test_an_empty_start_keeps_its_one_sentence() -> None:
    kept = RecoveryReport().stored()
    assert kept == StoredReport("System restarted. No pending tasks to recover.", ())
    assert kept.tasks == ()


def test_a_report_after_a_flood_keeps_a_bounded_number_of_ids_and_counts_the_rest() -> None:
    many = [f"{n:08x}-task" for n in range(MAX_LINKED + 150)]
    (line,) = RecoveryReport(retried=many).stored().lines
    assert line.text.startswith(f"{len(many)} tasks retried")  # the text counts them all
    assert line.task_ids == tuple(many[:MAX_LINKED]) and line.unlinked == 150
    assert (
        parse(dumps(RecoveryReport(retried=many).stored())) == RecoveryReport(retried=many).stored()
    )
