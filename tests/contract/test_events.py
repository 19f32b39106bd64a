"""The event family's contract: the owner's outbox (each key once, in order), the
event bus and its subscribers' offsets, the kernel's boots, and pruning them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pfar.errors import (
    IllegalTransition,
)
from pfar.journal import (
    Journal,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.boot_reports import ReportLine, ReportLineKind, StoredReport, UnreadableReport
from pfar.journal.bus_sql import BusEventKind as K
from pfar.journal.records import rfc3339
from pfar.journal.store import Store
from pfar.journal.tx import Tx

from . import builders as b
from .helpers import created, run, settle
from .verbs import covers, unwrapped

S = TaskState


# -- the event bus ----------------------------------------------------------------


@covers("events.bus")
def test_moves_are_bus_events_in_commit_order(store: Store) -> None:
    t = created(store)  # Extracting
    for to in (p.Planning(), p.Executing(), p.Paused(then=p.Executing()), p.Executing()):
        run(store.tasks.transition(t.task_id, to, point=None))
    run(store.tasks.transition(t.task_id, p.Synthesizing(), point=None))
    run(store.tasks.transition(t.task_id, p.Completed(), point=None))
    events = run(store.events.bus(0))
    mine = [e for e in events if e.task_id == t.task_id]
    # runner moves between working states are no events; arrivals and resumptions are
    assert [e.kind for e in mine] == [
        "TaskCreated",
        "TaskStarted",
        "TaskPaused",
        "TaskResumed",
        "TaskCompleted",
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert mine[-1].body["state"] == "Completed" and mine[-1].body["from"] == "Synthesizing"
    assert run(store.events.bus(mine[2].seq, limit=2)) == mine[3:5]


@covers("events.bus")
def test_a_refused_move_is_no_event(store: Store) -> None:
    t = created(store, p.Completed())
    before = run(store.events.bus(0))
    with pytest.raises(IllegalTransition):
        run(store.tasks.transition(t.task_id, p.Failed(), point=None))
    assert run(store.events.bus(0)) == before


@covers("events.bus_offset", "events.bus_ack")
def test_a_subscribers_offset_is_kept_and_never_goes_back(store: Store) -> None:
    assert run(store.events.bus_offset("watcher")) is None
    run(store.events.bus_ack("watcher", 7))
    run(store.events.bus_ack("watcher", 3))  # a late, older acknowledgement
    assert run(store.events.bus_offset("watcher")) == 7
    assert run(store.events.bus_offset("other")) is None


@covers("events.bus_last")
def test_the_bus_end_is_where_a_new_subscriber_starts(store: Store) -> None:
    assert run(store.events.bus_last()) == max((e.seq for e in run(store.events.bus(0))), default=0)
    t = created(store)
    last = run(store.events.bus_last())
    assert last == run(store.events.bus(0))[-1].seq
    assert [e.task_id for e in run(store.events.bus(last - 2))] == [t.task_id, t.task_id]


@covers("events.bus_high_water")
def test_the_high_water_mark_is_the_last_event_ever_appended(store: Store) -> None:
    before = run(store.events.bus_high_water())
    assert before >= run(store.events.bus_last())
    created(store)
    after = run(store.events.bus_high_water())
    assert after == run(store.events.bus_last()) == run(store.events.bus(0))[-1].seq
    assert after > before


# -- the outbox ---------------------------------------------------------------------


@covers("events.enqueue", "events.pending", "events.mark_delivered")
def test_a_message_key_is_sent_once(store: Store) -> None:
    m = b.message("result:x", "result", "hi")
    run(store.events.enqueue([m]))
    run(store.events.enqueue([replace(m, body="changed")]))
    assert run(store.events.pending()) == [m]
    store.events.mark_delivered([b.key("result:x")])  # rides on the next commit
    settle(store)
    assert run(store.events.pending()) == []
    run(store.events.enqueue([m]))  # a resend after delivery is still a no-op
    assert run(store.events.pending()) == []


@covers("events.pending")
def test_pending_messages_keep_their_order(store: Store) -> None:
    msgs = [b.message(f"k{i}", body=str(i)) for i in (3, 1, 2)]
    for m in msgs:
        run(store.events.enqueue([m]))
    assert run(store.events.pending()) == msgs


@covers("events.mark_delivered")
def test_mark_delivered_rides_on_the_next_commit(store: Store) -> None:
    run(store.events.enqueue([b.message("a"), b.message("b")]))

    async def go() -> None:
        store.events.mark_delivered([b.key("a")])
        await store.events.enqueue([b.message("c")])

    run(go())
    assert [m.message_key.text for m in run(store.events.pending())] == ["b", "c"]


@covers("questions.supersede_old_prompts")
def test_supersede_old_prompts_keeps_the_reports(store: Store) -> None:
    run(store.events.enqueue([b.message("q", "approval"), b.message("r", "report")]))
    run(store.events.enqueue([b.message("c", "credential")]))
    assert run(store.questions.supersede_old_prompts()) == 2
    assert [m.message_key.text for m in run(store.events.pending())] == ["r"]


@covers("events.start_boot", "events.end_boot", "events.last_boot")
def test_boots_start_and_end(store: Store) -> None:
    assert run(store.events.last_boot()) is None
    run(store.events.start_boot("boot-1", 123, "0.0"))
    boot = run(store.events.last_boot())
    assert boot is not None and boot["boot_id"] == "boot-1" and not boot["clean"]
    run(store.events.end_boot("boot-1"))
    boot = run(store.events.last_boot())
    assert boot is not None and boot["clean"] and boot["ended_at"] is not None


@covers("events.boots", "events.start_boot", "events.end_boot", "tasks.apply_recovery")
def test_boots_are_read_newest_first_with_the_report_each_start_kept(store: Store) -> None:
    assert run(store.events.boots()) == []
    for n in range(3):
        run(store.events.start_boot(f"boot-{n}", n, "0.0"))
    run(store.events.end_boot("boot-0"))  # boot-1 was killed; boot-2 runs
    t = created(store, p.Executing(current_step=1))
    line = ReportLine(ReportLineKind.abandoned, "1 task abandoned (x)", (t.task_id,))
    kept = StoredReport("System restarted. Recovery report:\n - 1 task abandoned (x)", (line,))
    run(
        store.tasks.apply_recovery(
            abandon=[(t.task_id, "died twice")],
            attempted=[],
            messages=[b.message("report:boot-2", "report", body=kept.text)],
            report=("boot-2", kept),
        )
    )
    boots = run(store.events.boots())
    assert [x.boot_id for x in boots] == ["boot-2", "boot-1", "boot-0"]
    newest, killed, first = boots
    assert newest.report == kept and newest.report.tasks == (t.task_id,)
    assert (newest.clean, newest.ended_at) == (False, None)
    # boots whose start kept no report (from before schema 14) are listed without one
    assert killed.report is None and not killed.clean
    assert first.report is None and first.clean and first.ended_at is not None
    assert [x.boot_id for x in run(store.events.boots(limit=2))] == ["boot-2", "boot-1"]
    # a boot's report is kept once: its own start's, never written over
    other = StoredReport("System restarted. No pending tasks to recover.", ())
    run(store.tasks.apply_recovery(abandon=[], attempted=[], messages=[], report=("boot-2", other)))
    assert run(store.events.boots(limit=1))[0].report == kept


@covers("events.boots", "events.start_boot")
def test_a_kept_report_this_pfar_cannot_read_is_listed_as_such_and_left_alone(
    store: Store,
) -> None:
    run(store.events.start_boot("boot-1", 1, "0.0"))
    # valid JSON (a jsonb column takes no other) that is no report: a newer pfar's, say
    odd = '{"form": "report", "lines": [], "text": 7}'

    def write(conn: Tx) -> None:
        conn.execute("UPDATE kernel_boots SET report_json = ? WHERE boot_id = ?", (odd, "boot-1"))

    journal = unwrapped(store)
    assert isinstance(journal, Journal)
    run(journal._db.write(write, None))
    (boot,) = run(store.events.boots())
    assert isinstance(boot.report, UnreadableReport) and "text" in boot.report.problem
    # reading it changes nothing: what was kept is kept
    run(
        store.tasks.apply_recovery(
            abandon=[], attempted=[], messages=[], report=("boot-1", StoredReport("x", ()))
        )
    )
    assert run(store.events.boots()) == [boot]


@covers(
    "events.prune",
    "adapters.register_channels",
    "adapters.sent",
    "adapters.failed",
    "adapters.sending",
    "adapters.delivery_counts",
    "adapters.replied_to",
)
def test_prune_drops_ended_deliveries_and_old_boots_in_batches(store: Store) -> None:
    run(store.adapters.register_channels(["chat"]))
    run(store.events.enqueue([b.message(k) for k in ("sent", "failed", "pending", "doubt")]))
    run(store.adapters.sent("chat", b.key("sent"), "r-1"))
    run(store.adapters.failed("chat", b.key("failed"), "refused"))
    run(store.adapters.sending("chat", b.key("doubt")))
    run(store.adapters.register_channels(["chat"]))  # a restart: `doubt` is in doubt
    for n in range(5):
        run(store.events.start_boot(f"boot-{n}", n, "0.0"))
    later = rfc3339(datetime.now(UTC) + timedelta(days=1))
    earlier = rfc3339(datetime.now(UTC) - timedelta(days=1))
    assert run(store.events.prune(earlier, keep_boots=5)) == 0  # nothing is old enough
    # two ended deliveries and three boots beyond the newest two, two a commit
    assert run(store.events.prune(later, keep_boots=2, batch=2)) == 4
    assert run(store.events.prune(later, keep_boots=2, batch=2)) == 1
    assert run(store.events.prune(later, keep_boots=2, batch=2)) == 0
    counts = run(store.adapters.delivery_counts("chat"))
    # pending: the one never sent, and the notice that `doubt` may not have arrived
    assert counts == {"pending": 2, "in_doubt": 1}, counts
    assert run(store.adapters.replied_to("chat", "r-1")) is None
    boot = run(store.events.last_boot())
    assert boot is not None and boot["boot_id"] == "boot-4"


@covers("events.for_task")
def test_a_tasks_messages_are_read_in_order_with_their_status(store: Store) -> None:
    t = created(store)
    run(store.events.enqueue([b.message("a", task_id=t.task_id, body="one")]))
    run(store.events.enqueue([b.message("other", task_id="t-other"), b.message("none")]))
    run(store.events.enqueue([b.message("b", "result", "two", task_id=t.task_id)]))
    store.events.mark_delivered([b.key("a")])  # rides on the next commit
    settle(store)
    got = run(store.events.for_task(t.task_id))
    assert [(m["message_key"], m["kind"], m["body"], m["status"]) for m in got] == [
        ("a", "notice", "one", "delivered"),
        ("b", "result", "two", "pending"),
    ]
    assert got[0]["delivered_at"] is not None and got[1]["delivered_at"] is None
    assert all(m["created_at"] for m in got)
    assert run(store.events.for_task("t-none")) == []


@covers("events.publish", "events.bus_for_task")
def test_published_events_join_the_bus_in_order(store: Store) -> None:
    t = created(store)  # TaskCreated, TaskStarted
    run(store.events.publish(K.LearningExtracted, t.task_id, {"text": "ünï"}))
    run(store.events.publish(K.VaultLossAccepted, None, {"n": 1}))
    run(store.tasks.transition(t.task_id, p.Paused(then=p.Extracting()), point=None))
    mine = run(store.events.bus_for_task(t.task_id, frozenset({K.LearningExtracted, K.TaskPaused})))
    assert [(e.kind, e.task_id) for e in mine] == [
        ("LearningExtracted", t.task_id),
        ("TaskPaused", t.task_id),
    ]
    assert mine[0].body == {"text": "ünï"} and mine[0].seq < mine[1].seq
    (note,) = [e for e in run(store.events.bus(0)) if e.kind is K.VaultLossAccepted]
    assert (note.task_id, note.body) == (None, {"n": 1})
    assert run(store.events.bus_for_task(t.task_id, frozenset({K.TaskFailed}))) == []
    assert run(store.events.bus_for_task("t-none", frozenset({K.TaskPaused}))) == []
