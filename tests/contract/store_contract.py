"""The store contract, written once and run on every journal backend (STYLE.md §23).

`StoreContract` holds the test methods; a backend's test class subclasses it and says
how to open its store (`make_store`), where a child process finds that opener
(`opener`), and how to check its database whole (`integrity_problems`). The SQLite
journal runs it in test_sqlite_store.py; a PostgreSQL store subclasses it unchanged.

Each method states one verb's contract as the journal's docstrings give it: what is
written, what is refused (and that a refusal changes nothing), what happens once.
Nothing here reads a backend's tables: only the store's own verbs and reads.

Leases for many kernels (DESIGN.md "Many kernels": an owner kernel, an expiry and an
epoch per task, renewed by a heartbeat; claiming with FOR UPDATE SKIP LOCKED; writes
fenced by the epoch) are further contract methods to add here when the store has
them, e.g. `test_a_claim_skips_tasks_another_kernel_holds`,
`test_an_expired_lease_is_claimed_with_a_new_epoch` and
`test_a_write_under_an_old_epoch_is_refused`; a backend that cannot share a journal
between kernels (SQLite: one kernel per home) skips them through a class attribute,
as `commits_made` lets a backend without a commit counter skip that check.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from pfar.answers import Approve, Deny, Retry
from pfar.errors import (
    AlreadyDecided,
    AnswerDoesNotFit,
    IllegalTransition,
    TaskStateRefused,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownTask,
)
from pfar.journal import (
    ApprovalStatus,
    CredentialStatus,
    StepStatus,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from pfar.journal import payloads as p
from pfar.journal.holds import CANCELLED_ERROR, PauseOutcome, ResumeOutcome
from pfar.journal.locks_sql import LockClaim, LockOwner
from pfar.journal.records import now_rfc3339, rfc3339
from pfar.journal.store import Store

from . import builders as b

S = TaskState
T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]


def run(coro: Awaitable[T]) -> T:
    async def go() -> T:
        return await coro

    return asyncio.run(go())


# every payload kind, with its optional fields filled in, and a state it is entered from
RICH_PAYLOADS: list[tuple[TaskState, p.Payload]] = [
    (S.Extracting, p.Extracting(llm_request=p.LlmRequest(phase="extract", sent_at="t0"))),
    (S.Extracting, p.Planning()),
    (
        S.Planning,
        p.Executing(
            current_step=3,
            retry_step=3,
            skip_step=4,
            approved=p.Grant(step=3, args_sha256="b" * 64),
            workflow_answer=p.WorkflowAnswer(
                option="rerun", question="failed", step=3, approval_id="ap-1"
            ),
        ),
    ),
    (S.Executing, p.Synthesizing(llm_request=p.LlmRequest(phase="synthesize", sent_at="t1"))),
    (
        S.Executing,
        p.AwaitingApproval(
            approval_id="ap-2",
            step=2,
            on_deny="skip",
            template_seen="hash",
            approved=p.Grant(step=2),
            in_flight=p.InFlight(deaths=3, then=p.Executing(current_step=2)),
        ),
    ),
    (S.Planning, p.AwaitingApproval(approval_id="ap-3", resume_to="Planning")),
    (
        S.Executing,
        p.AwaitingCredential(prompt_id="pr-1", service="svc", prompt_message_id="m", step=5),
    ),
    (
        S.Planning,
        p.Paused(then=p.Planning(llm_request=p.LlmRequest(phase="plan", sent_at="t2"))),
    ),
    (S.Executing, p.Cancelling(cancelled_from=S.Executing, step=7)),
    (S.Synthesizing, p.Completed()),
    (S.Executing, p.Failed()),
    (S.Planning, p.Abandoned()),
    (S.Cancelling, p.Cancelled()),
]


class StoreContract:
    """Every store verb's contract. Subclass it as `Test<Backend>Store` and implement
    `make_store`; the class attributes and hooks below have SQLite-free defaults."""

    # "module:function" a child process calls as function(path) to open the store
    opener: ClassVar[str]

    # -- what a backend supplies ----------------------------------------------------

    def make_store(self, path: Path) -> Store:
        """An opened store kept under `path` (a directory), created if it is not there
        and opened as it is if it is: reopening shows what was committed."""
        raise NotImplementedError

    def integrity_problems(self, path: Path) -> list[str]:
        """What a whole-database check of the store under `path` finds ([] when sound)."""
        return []

    def commits_made(self, store: Store) -> int | None:
        """How many commits the store made so far (None: the backend does not count)."""
        return None

    def check_unfinished_reads_an_index(self, store: Store) -> None:
        """Assert that `await store.tasks.unfinished()` reads only unfinished rows (an index)."""

    # -- fixtures ---------------------------------------------------------------------

    @pytest.fixture
    def store_path(self, tmp_path: Path) -> Path:
        return tmp_path / "store"

    @pytest.fixture
    def store(self, store_path: Path) -> Iterator[Store]:
        store_path.mkdir(exist_ok=True)
        s = self.make_store(store_path)
        yield s
        s.close()

    # -- helpers ------------------------------------------------------------------------

    def created(self, store: Store, payload: p.Payload | None = None) -> TaskRecord:
        t = b.task(payload=payload) if payload is not None else b.task()
        got, made = run(store.tasks.create(t))
        assert made and got == t
        return t

    # -- create -----------------------------------------------------------------------

    def test_create_reads_back_the_record(self, store: Store) -> None:
        t = b.task(event_id="ev-read", text="ünïcode ✓")
        got, created = run(store.tasks.create(t, b.event("ev-read", "ünïcode ✓")))
        assert created is True and got == t
        assert run(store.tasks.get(t.task_id)) == t

    def test_create_with_an_event_is_exactly_once(self, store: Store) -> None:
        first = b.task(event_id="ev-1")
        second = b.task(event_id="ev-1", text="a redelivery")
        got1, created1 = run(store.tasks.create(first, b.event("ev-1")))
        got2, created2 = run(store.tasks.create(second, b.event("ev-1", "a redelivery")))
        assert (created1, created2) == (True, False)
        assert got2 == got1 == first
        assert [t.task_id for t in run(store.tasks.listing())] == [first.task_id]
        with pytest.raises(UnknownTask):
            run(store.tasks.get(second.task_id))

    def test_concurrent_redeliveries_create_one_task(self, store: Store) -> None:
        async def go() -> list[tuple[TaskRecord, bool]]:
            return await asyncio.gather(
                *(store.tasks.create(b.task(event_id="ev-x"), b.event("ev-x")) for _ in range(12))
            )

        results = run(go())
        assert sum(created for _, created in results) == 1
        assert len({t.task_id for t, _ in results}) == 1
        assert len(run(store.tasks.listing())) == 1

    def test_create_without_an_event_creates_each_time(self, store: Store) -> None:
        self.created(store)
        self.created(store)
        assert len(run(store.tasks.listing())) == 2

    # -- claiming ---------------------------------------------------------------------

    def test_a_claim_takes_every_unfinished_task_and_reads_no_finished_one(
        self, store: Store
    ) -> None:
        open_ = [self.created(store, payload) for payload in (None, p.Planning(), p.Executing())]
        for payload in (p.Completed(), p.Failed(), p.Cancelled()):
            self.created(store, payload)
        looked, malformed = run(store.tasks.unfinished())
        claimed, claimed_malformed = run(store.tasks.claim_unfinished())
        assert malformed == claimed_malformed == []
        assert {t.task_id for t in claimed} == {t.task_id for t in open_}
        assert claimed == looked
        # this kernel holds its claim: claiming again takes the same tasks, and the
        # tasks are written as before
        assert run(store.tasks.claim_unfinished())[0] == claimed
        run(store.tasks.transition(open_[1].task_id, p.Executing(), point=None))
        assert run(store.tasks.get(open_[1].task_id)).state is S.Executing

    def test_an_unknown_task_is_named(self, store: Store) -> None:
        with pytest.raises(UnknownTask, match="'nope'"):
            run(store.tasks.get("nope"))
        with pytest.raises(UnknownTask, match="'nope'"):
            run(store.tasks.payload("nope"))
        with pytest.raises(UnknownTask, match="'nope'"):
            run(store.tasks.transition("nope", p.Planning(), point=None))

    def test_payload_reads_the_state_payload_alone(self, store: Store) -> None:
        t = self.created(store, p.Executing(current_step=3, pause_requested=True))
        assert run(store.tasks.payload(t.task_id)) == run(store.tasks.get(t.task_id)).payload
        assert run(store.tasks.payload(t.task_id)) == p.Executing(
            current_step=3, pause_requested=True
        )

    # -- transition --------------------------------------------------------------------

    def test_a_legal_transition_applies_its_payload_and_columns(self, store: Store) -> None:
        t = self.created(store)
        meta = {"who": "me", "n": [1, 2.5, None, True]}
        now = run(
            store.tasks.transition(
                t.task_id, p.Planning(), point=None, update=TaskUpdate(extracted_metadata=meta)
            )
        )
        assert now is S.Planning
        planned = run(store.tasks.get(t.task_id))
        assert (planned.state, planned.payload, planned.phase) == (S.Planning, p.Planning(), "plan")
        assert planned.extracted_metadata == meta
        assert planned.updated_at >= t.updated_at
        plan = {"steps": [{"tool": "t", "args": {"k": "v"}}] * 2}
        update = TaskUpdate(
            plan=plan,
            execute_progress={"current_step": 0},
            template_hash="h2",
            error="a note",
        )
        assert run(store.tasks.transition(t.task_id, p.Executing(), point=None, update=update)) is (
            S.Executing
        )
        got = run(store.tasks.get(t.task_id))
        assert got.plan == plan and got.execute_progress == {"current_step": 0}
        assert (got.template_hash, got.error, got.phase) == ("h2", "a note", "execute")
        # None in a TaskUpdate leaves the column as it is
        assert got.extracted_metadata == meta
        # the rest of the row is the one created
        assert replace(got, **_moving_columns(t)) == replace(t, **_moving_columns(t))

    def test_an_illegal_transition_is_refused_and_changes_nothing(self, store: Store) -> None:
        t = self.created(store)
        msg = b.message("illegal:1")
        with pytest.raises(IllegalTransition) as info:
            run(
                store.tasks.transition(
                    t.task_id,
                    p.Completed(),
                    point=None,
                    update=TaskUpdate(error="nope"),
                    messages=[msg],
                )
            )
        assert (info.value.task_id, info.value.src, info.value.dst) == (
            t.task_id,
            "Extracting",
            "Completed",
        )
        assert run(store.tasks.get(t.task_id)) == t
        assert run(store.events.pending()) == []  # its messages went with it

    def test_a_pause_goes_back_only_to_the_state_it_holds(self, store: Store) -> None:
        t = self.created(store, p.Planning())
        with pytest.raises(IllegalTransition):
            run(store.tasks.transition(t.task_id, p.Paused(then=p.Executing()), point=None))
        assert run(store.tasks.get(t.task_id)) == t

    def test_terminal_states_are_absorbing(self, store: Store) -> None:
        for end in (p.Completed(), p.Failed(), p.Abandoned(), p.Cancelled()):
            t = self.created(store, end)
            with pytest.raises(IllegalTransition):
                run(store.tasks.transition(t.task_id, p.Failed(), point=None))
            assert run(store.tasks.get(t.task_id)) == t

    def test_transition_queues_its_messages_in_its_commit(self, store: Store) -> None:
        t = self.created(store)
        msgs = [b.message(f"m:{i}", task_id=t.task_id) for i in range(3)]
        run(store.tasks.transition(t.task_id, p.Planning(), point=None, messages=msgs))
        assert run(store.events.pending()) == msgs

    # -- the event bus ----------------------------------------------------------------

    def test_moves_are_bus_events_in_commit_order(self, store: Store) -> None:
        t = self.created(store)  # Extracting
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

    def test_a_refused_move_is_no_event(self, store: Store) -> None:
        t = self.created(store, p.Completed())
        before = run(store.events.bus(0))
        with pytest.raises(IllegalTransition):
            run(store.tasks.transition(t.task_id, p.Failed(), point=None))
        assert run(store.events.bus(0)) == before

    def test_a_subscribers_offset_is_kept_and_never_goes_back(self, store: Store) -> None:
        assert run(store.events.bus_offset("watcher")) is None
        run(store.events.bus_ack("watcher", 7))
        run(store.events.bus_ack("watcher", 3))  # a late, older acknowledgement
        assert run(store.events.bus_offset("watcher")) == 7
        assert run(store.events.bus_offset("other")) is None

    def test_the_bus_end_is_where_a_new_subscriber_starts(self, store: Store) -> None:
        assert run(store.events.bus_last()) == max(
            (e.seq for e in run(store.events.bus(0))), default=0
        )
        t = self.created(store)
        last = run(store.events.bus_last())
        assert last == run(store.events.bus(0))[-1].seq
        assert [e.task_id for e in run(store.events.bus(last - 2))] == [t.task_id, t.task_id]

    # -- resource locks (locks_sql.py) ----------------------------------------------

    def _owner(self, boot: str = "boot-1", pid: int = 101, host: str = "here") -> LockOwner:
        return LockOwner(boot, host, pid, 5000 + pid)

    def test_locks_are_taken_all_or_none(self, store: Store) -> None:
        me, other = self._owner(), self._owner("boot-2", 202)
        alive = lambda pid, started: True  # noqa: E731
        a = LockClaim("file", "/w/a", "exclusive")
        b = LockClaim("file", "/w/b", "shared")
        assert run(store.locks.acquire([b], "t2:0", "t2", other, 60, alive)) == (None, 0)
        # a shared lock held elsewhere does not stop a shared claim, only an exclusive one
        assert run(store.locks.acquire([b], "t1:0", "t1", me, 60, alive)) == (None, 0)
        _release(store, "t1:0")
        found, _ = run(
            store.locks.acquire(
                [a, LockClaim("file", "/w/b", "exclusive")], "t1:1", "t1", me, 60, alive
            )
        )
        assert found is not None and found.holder == "t2:0" and found.pid == 202
        # none of the claims was taken: /w/a is still free for another holder
        assert [h.name for h in run(store.locks.held())] == ["/w/b"]
        _release(store, "t2:0")
        assert run(store.locks.held()) == []

    def test_a_lock_whose_holder_is_gone_or_whose_lease_expired_is_taken(
        self, store: Store
    ) -> None:
        me = self._owner()
        claim = [LockClaim("repo", "/w", "exclusive")]
        run(
            store.locks.acquire(
                claim, "t2:0", "t2", self._owner("boot-2", 202), 60, lambda p, s: True
            )
        )
        # the holder's process is gone (same host): stale, taken over
        assert run(store.locks.acquire(claim, "t1:0", "t1", me, 60, lambda p, s: p != 202)) == (
            None,
            1,
        )
        # a holder on another host cannot be looked at: its lease decides
        far = self._owner("boot-3", 303, host="elsewhere")
        _release(store, "t1:0")
        run(store.locks.acquire(claim, "t3:0", "t3", far, 0, lambda p, s: False))
        # (its lease of 0 s ended as it was taken)
        assert run(store.locks.acquire(claim, "t1:1", "t1", me, 60, lambda p, s: False)) == (
            None,
            1,
        )
        # a live holder elsewhere with a lease that runs is waited on
        _release(store, "t1:1")
        run(
            store.locks.acquire(
                claim, "t4:0", "t4", self._owner("boot-4", 404, "far"), 3600, lambda p, s: False
            )
        )
        found, _ = run(store.locks.acquire(claim, "t5:0", "t5", me, 60, lambda p, s: False))
        assert found is not None and found.holder == "t4:0" and found.host == "far"

    def test_stale_locks_and_old_waits_are_cleared_at_a_start(self, store: Store) -> None:
        claim = [LockClaim("host", "example.com", "exclusive")]
        old = self._owner("boot-0", 99)
        run(store.locks.acquire(claim, "t9:0", "t9", old, 3600, lambda p, s: True))
        store.locks.waiting("t8:0", "t8", "boot-0", "lock: host example.com held by task t9")
        run(store.locks.renew("boot-0", 3600))  # a commit: the deferred wait rides on it
        assert run(store.locks.waits()) == {"t8": "lock: host example.com held by task t9"}
        assert run(store.locks.clear_stale(self._owner(), lambda p, s: p != 99)) == 1
        assert run(store.locks.held()) == [] and run(store.locks.waits()) == {}

    def test_a_hook_verdict_is_kept_once_with_its_task(self, store: Store) -> None:
        t = self.created(store)
        assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:0")) is None
        first = {"blocked": None, "changes": {"input": {"command": "ls"}}}
        kept = run(store.tasks.record_hook_verdict(t.task_id, "PreToolUse:step:0", first))
        assert kept == first
        # a second firing about the same step never replaces the first verdict
        second = {"blocked": "no", "changes": {}}
        assert run(store.tasks.record_hook_verdict(t.task_id, "PreToolUse:step:0", second)) == first
        assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:0")) == first
        assert run(store.tasks.hook_verdict(t.task_id, "PreToolUse:step:1")) is None

    @pytest.mark.parametrize(
        ("src", "payload"), RICH_PAYLOADS, ids=lambda v: getattr(v, "kind", str(v))
    )
    def test_typed_payloads_read_back_as_written(
        self, store: Store, src: TaskState, payload: p.Payload
    ) -> None:
        # written by create
        assert self.created(store, payload).payload == payload
        assert run(store.tasks.get(self.created(store, payload).task_id)).payload == payload
        # and by a transition
        before = self.created(store, b.task(src).payload)
        assert run(store.tasks.transition(before.task_id, payload, point=None)) is p.state_of(
            payload
        )
        assert run(store.tasks.get(before.task_id)).payload == payload

    # -- steps ------------------------------------------------------------------------

    def test_a_step_row_is_written_only_while_executing(self, store: Store) -> None:
        for payload in (p.Planning(), p.Paused(then=p.Executing()), p.Completed()):
            t = self.created(store, payload)
            with pytest.raises(IllegalTransition):
                run(store.tasks.step_started(b.step(t.task_id, 0)))
            with pytest.raises(IllegalTransition):
                run(
                    store.tasks.step_finished(
                        b.step(t.task_id, 0, StepStatus.completed), next_step=1
                    )
                )
            assert run(store.tasks.steps(t.task_id)) == []
            assert run(store.tasks.get(t.task_id)) == t
        assert run(store.tasks.steps_in_flight()) == {}

    def test_step_started_is_durable_and_overwritten_by_a_rerun(self, store: Store) -> None:
        t = self.created(store, p.Executing())
        first = b.step(t.task_id, 0)
        run(store.tasks.step_started(first))
        assert run(store.tasks.steps(t.task_id)) == [first]
        assert run(store.tasks.step(t.task_id, 0)) == first
        assert run(store.tasks.steps_in_flight()) == {t.task_id: first}
        rerun = replace(first, args={"url": "http://y"})
        run(store.tasks.step_started(rerun))
        assert run(store.tasks.steps(t.task_id)) == [rerun]
        # a running step's process, so that a restart can end it
        run(store.tasks.step_process(t.task_id, 0, {"pid": 4242, "start": 1.5}))
        assert run(store.tasks.started_processes(t.task_id)) == [
            (t.task_id, 0, {"pid": 4242, "start": 1.5})
        ]

    def test_step_started_spends_the_answers_of_a_run(self, store: Store) -> None:
        answers: dict[str, Any] = {
            "retry_step": 1,
            "approved": p.Grant(step=1, args_sha256="c" * 64),
            "workflow_answer": p.WorkflowAnswer(
                option="rerun", question="q", step=1, approval_id="ap"
            ),
        }
        assert set(p.SPENT_BY_A_RUN) <= set(answers), "give the contract the new answer field"
        answered = p.Executing(current_step=1, skip_step=2, **answers)
        t = self.created(store, answered)
        run(store.tasks.step_started(b.step(t.task_id, 1)))
        after = run(store.tasks.get(t.task_id))
        spent: dict[str, Any] = dict.fromkeys(p.SPENT_BY_A_RUN)
        assert after.payload == replace(answered, **spent)
        assert after.state is S.Executing and after.current_step == 1

    def test_step_finished_records_its_result_and_the_progress(self, store: Store) -> None:
        t = self.created(store, p.Executing())
        started = b.step(t.task_id, 0)
        run(store.tasks.step_started(started))
        outcome = b.step(t.task_id, 0, StepStatus.completed, {"status": 200, "body": "ünï"})
        assert run(store.tasks.step_finished(replace(outcome, args={}), next_step=1)) is S.Executing
        # the outcome is added to the started row: its start (time, arguments) stays
        done = replace(outcome, started_at=started.started_at, args=started.args)
        # a read's outcome needs no start
        read = b.step(t.task_id, 1, StepStatus.skipped, ["a", 1])
        assert run(store.tasks.step_finished(read, next_step=2)) is S.Executing
        assert run(store.tasks.steps(t.task_id)) == [done, read]
        assert run(store.tasks.step_results(t.task_id)) == [
            {"status": 200, "body": "ünï"},
            ["a", 1],
        ]
        assert run(store.tasks.steps_in_flight()) == {}
        task = run(store.tasks.get(t.task_id))
        assert task.payload == p.Executing(current_step=2)
        assert task.execute_progress is not None
        assert task.execute_progress["current_step"] == 2
        assert task.execute_progress["last_completed"] == 1
        last = b.step(t.task_id, 2, StepStatus.completed, None)
        assert run(store.tasks.step_finished(last, next_step=3, last=True)) is S.Synthesizing
        assert run(store.tasks.get(t.task_id)).state is S.Synthesizing
        assert len(run(store.tasks.steps(t.task_id))) == 3

    def test_step_finished_is_where_a_requested_pause_lands(self, store: Store) -> None:
        t = self.created(store, p.Executing())
        state, outcome = run(store.tasks.request_pause(t.task_id, running=lambda: True))
        assert (state, outcome) == (S.Executing, PauseOutcome.requested)
        done = b.step(t.task_id, 0, StepStatus.completed, 1)
        assert run(store.tasks.step_finished(done, next_step=1)) is S.Paused
        assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=p.Executing(current_step=1))
        assert run(store.tasks.steps(t.task_id)) == [done]

    def test_step_failed_fails_the_task_in_one_commit(self, store: Store) -> None:
        t = self.created(store, p.Executing())
        msg = b.message(f"failed:{t.task_id}", task_id=t.task_id)
        started = b.step(t.task_id, 0)
        run(store.tasks.step_started(started))
        failed = replace(b.step(t.task_id, 0, StepStatus.failed), started_at=started.started_at)
        run(store.tasks.step_failed(failed, "step 1 of 3: boom", [msg]))
        task = run(store.tasks.get(t.task_id))
        assert (task.state, task.error) == (S.Failed, "step 1 of 3: boom")
        assert run(store.tasks.steps(t.task_id)) == [failed]
        assert run(store.events.pending()) == [msg]

    def test_step_failed_on_an_ended_task_writes_nothing(self, store: Store) -> None:
        t = self.created(store, p.Completed())
        msg = b.message("late")
        with pytest.raises(IllegalTransition):
            run(store.tasks.step_failed(b.step(t.task_id, 0, StepStatus.failed), "late", [msg]))
        assert run(store.tasks.steps(t.task_id)) == []
        assert run(store.tasks.get(t.task_id)) == t
        assert run(store.events.pending()) == []

    @pytest.mark.parametrize(
        "payload",
        [
            p.Paused(then=p.Executing()),
            p.Cancelling(cancelled_from=S.Executing),
            p.Planning(),
            p.AwaitingApproval(approval_id="ap", step=0),
        ],
        ids=lambda v: v.kind,
    )
    def test_step_failed_writes_a_row_only_while_executing(
        self, store: Store, payload: p.Payload
    ) -> None:
        t = self.created(store, payload)
        with pytest.raises(IllegalTransition):
            run(store.tasks.step_failed(b.step(t.task_id, 0, StepStatus.failed), "late"))
        assert run(store.tasks.steps(t.task_id)) == []
        assert run(store.tasks.get(t.task_id)) == t

    # -- approvals ---------------------------------------------------------------------

    def parked(self, store: Store, **kw: Any) -> tuple[TaskRecord, Any]:
        t = self.created(store, p.Executing(current_step=1))
        a = b.approval(t.task_id, **kw)
        msg = b.message(f"approval:{a.approval_id}:0", "approval", task_id=t.task_id)
        run(
            store.questions.park_approval(
                a, msg, p.AwaitingApproval(approval_id=a.approval_id, step=1)
            )
        )
        return t, a

    def test_park_approval_is_one_commit(self, store: Store) -> None:
        t, a = self.parked(store)
        task = run(store.tasks.get(t.task_id))
        assert task.payload == p.AwaitingApproval(approval_id=a.approval_id, step=1)
        stored = run(store.questions.approval(a.approval_id))
        assert stored == replace(a, prompts_sent=1)
        assert run(store.questions.approvals()) == [stored]
        assert run(store.questions.approvals_for_task(t.task_id)) == [stored]
        assert [m.message_key for m in run(store.events.pending())] == [
            f"approval:{a.approval_id}:0"
        ]
        assert run(store.questions.next_deadline()) == a.expires_at

    def test_park_approval_on_another_question_writes_nothing(self, store: Store) -> None:
        t = self.created(store, p.Executing(current_step=1))
        a = b.approval(t.task_id)
        with pytest.raises(ValueError, match="another approval"):
            run(
                store.questions.park_approval(
                    a, b.message("q"), p.AwaitingApproval(approval_id="other", step=1)
                )
            )
        assert run(store.tasks.get(t.task_id)) == t
        with pytest.raises(UnknownApproval):
            run(store.questions.approval(a.approval_id))
        assert run(store.events.pending()) == []

    def test_decide_approval_once(self, store: Store) -> None:
        t, a = self.parked(store)
        calls: list[str] = []

        def resume(task: TaskRecord, ap: Any, answer: Any) -> Any:
            calls.append(answer.kind)
            return b.resume_to(task, ap, answer)

        decided, changed = run(
            store.questions.decide_approval(a.approval_id, Approve(), resume_to=resume, by="cli")
        )
        assert changed is True
        assert (decided.status, decided.decision) == (ApprovalStatus.approved, "approve")
        assert decided.decided_at is not None
        after = run(store.tasks.get(t.task_id))
        assert after.payload == p.Executing(
            current_step=1, retry_step=1, approved=p.Grant(step=1, args_sha256=a.args_sha256)
        )
        # the same answer again: one effect
        again, changed2 = run(
            store.questions.decide_approval(a.approval_id, Approve(), resume_to=resume, by="cli")
        )
        assert (again, changed2) == (decided, False)
        assert run(store.tasks.get(t.task_id)) == after
        assert calls == ["approve"]
        # a different answer: AlreadyDecided, nothing moves
        with pytest.raises(AlreadyDecided, match="approved"):
            run(store.questions.decide_approval(a.approval_id, Deny(), resume_to=resume, by="cli"))
        assert run(store.questions.approval(a.approval_id)) == decided
        assert run(store.tasks.get(t.task_id)) == after
        assert run(store.questions.approvals()) == []

    def test_an_answer_not_offered_does_not_fit(self, store: Store) -> None:
        t, a = self.parked(store)
        before = run(store.tasks.get(t.task_id))
        with pytest.raises(AnswerDoesNotFit):
            run(
                store.questions.decide_approval(
                    a.approval_id, Retry(), resume_to=b.resume_to, by="cli"
                )
            )
        assert run(store.questions.approval(a.approval_id)) == replace(a, prompts_sent=1)
        assert run(store.tasks.get(t.task_id)) == before

    def test_a_deny_moves_the_task_where_resume_to_says(self, store: Store) -> None:
        t, a = self.parked(store)
        decided, _ = run(
            store.questions.decide_approval(a.approval_id, Deny(), resume_to=b.resume_to, by="cli")
        )
        assert decided.status is ApprovalStatus.denied
        task = run(store.tasks.get(t.task_id))
        assert (task.state, task.error) == (S.Failed, "denied by the owner")

    def test_concurrent_identical_answers_have_one_effect(self, store: Store) -> None:
        _, a = self.parked(store)

        async def go() -> list[tuple[Any, bool]]:
            return await asyncio.gather(
                *(
                    store.questions.decide_approval(
                        a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
                    )
                    for _ in range(8)
                )
            )

        results = run(go())
        assert sum(changed for _, changed in results) == 1
        assert len({r.decided_at for r, _ in results}) == 1

    def test_unknown_questions_are_named(self, store: Store) -> None:
        with pytest.raises(UnknownApproval, match="'zzz'"):
            run(store.questions.decide_approval("zzz", Approve(), resume_to=b.resume_to, by="cli"))
        with pytest.raises(UnknownCredentialPrompt, match="'ppp'"):
            run(store.questions.receive_credential("ppp", "cli"))
        with pytest.raises(UnknownCredentialPrompt):
            run(store.questions.credential_prompt("ppp"))

    def test_expire_due_fails_the_tasks_of_lapsed_questions_once(self, store: Store) -> None:
        late, a = self.parked(store, expires_in=-1)
        _, live = self.parked(store)
        t = self.created(store, p.Executing(current_step=2))
        pr = b.prompt(t.task_id, expires_in=-1)
        run(
            store.questions.park_credential(
                pr, b.message(f"credential:{pr.prompt_id}:0", "credential")
            )
        )
        failed = run(store.questions.expire_due(now_rfc3339()))
        assert sorted(failed) == sorted(
            [(late.task_id, "approval timeout"), (t.task_id, "credential prompt timeout")]
        )
        assert run(store.tasks.get(late.task_id)).state is S.Failed
        assert run(store.tasks.get(t.task_id)).state is S.Failed
        assert run(store.questions.approval(a.approval_id)).status is ApprovalStatus.expired
        assert (
            run(store.questions.credential_prompt(pr.prompt_id)).status is CredentialStatus.expired
        )
        assert run(store.questions.approval(live.approval_id)).status is ApprovalStatus.pending
        with pytest.raises(AlreadyDecided, match="expired"):
            run(
                store.questions.decide_approval(
                    a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
                )
            )
        with pytest.raises(AlreadyDecided):
            run(store.questions.receive_credential(pr.prompt_id, "cli"))
        assert run(store.questions.expire_due(now_rfc3339())) == []

    # -- credential prompts -----------------------------------------------------------

    def test_park_credential_and_receive_it_once(self, store: Store) -> None:
        t = self.created(store, p.Executing(current_step=2))
        pr = b.prompt(t.task_id, step=2)
        key = f"credential:{pr.prompt_id}:0"
        run(store.questions.park_credential(pr, b.message(key, "credential", task_id=t.task_id)))
        assert run(store.tasks.get(t.task_id)).payload == p.AwaitingCredential(
            prompt_id=pr.prompt_id, service="notion", prompt_message_id=key, step=2
        )
        stored = run(store.questions.credential_prompt(pr.prompt_id))
        assert stored == replace(pr, message_id=key)
        assert run(store.questions.credential_prompts()) == [stored]
        assert run(store.questions.credential_prompts_for_task(t.task_id)) == [stored]
        assert [m.message_key for m in run(store.events.pending())] == [key]
        done, changed = run(store.questions.receive_credential(pr.prompt_id, "cli"))
        assert changed and done.status is CredentialStatus.received
        assert done.received_at is not None
        task = run(store.tasks.get(t.task_id))
        assert task.payload == p.Executing(current_step=2)
        with pytest.raises(AlreadyDecided, match="received"):
            run(store.questions.receive_credential(pr.prompt_id, "cli"))
        assert run(store.tasks.get(t.task_id)) == task
        assert run(store.questions.credential_prompts()) == []

    # -- the owner's hold: pause, unpause, cancel ---------------------------------------

    def test_pause_now_and_unpause_back_to_exactly_the_payload(self, store: Store) -> None:
        held = p.Executing(current_step=4, skip_step=5)
        t = self.created(store, held)
        state, outcome = run(store.tasks.request_pause(t.task_id, running=lambda: False))
        assert (state, outcome) == (S.Paused, PauseOutcome.paused)
        assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=held)
        assert run(store.tasks.request_pause(t.task_id, running=lambda: False)) == (
            S.Paused,
            PauseOutcome.already,
        )
        # a runner's move out of Paused is refused
        with pytest.raises(IllegalTransition):
            run(store.tasks.transition(t.task_id, p.Synthesizing(), point=None))
        assert run(store.tasks.unpause(t.task_id)) == (S.Executing, ResumeOutcome.resumed)
        assert run(store.tasks.get(t.task_id)).payload == held

    def test_a_pause_request_is_withdrawn_before_its_boundary(self, store: Store) -> None:
        t = self.created(store, p.Planning())
        assert run(store.tasks.request_pause(t.task_id, running=lambda: True)) == (
            S.Planning,
            PauseOutcome.requested,
        )
        assert run(store.tasks.get(t.task_id)).payload == p.Planning(pause_requested=True)
        assert run(store.tasks.unpause(t.task_id)) == (S.Planning, ResumeOutcome.withdrawn)
        assert run(store.tasks.get(t.task_id)).payload == p.Planning()
        # requested again, the next move of the runner is the boundary
        run(store.tasks.request_pause(t.task_id, running=lambda: True))
        assert run(store.tasks.transition(t.task_id, p.Executing(), point=None)) is S.Paused
        assert run(store.tasks.get(t.task_id)).payload == p.Paused(then=p.Executing())

    def test_pause_and_unpause_refuse_what_they_cannot_hold(self, store: Store) -> None:
        for payload in (b.task(S.AwaitingApproval).payload, p.Completed()):
            t = self.created(store, payload)
            with pytest.raises(TaskStateRefused):
                run(store.tasks.request_pause(t.task_id, running=lambda: False))
            with pytest.raises(TaskStateRefused):
                run(store.tasks.unpause(t.task_id))
            assert run(store.tasks.get(t.task_id)) == t

    def test_begin_cancel_withdraws_the_questions_and_holds_the_task(self, store: Store) -> None:
        t, a = self.parked(store)
        intent = run(store.tasks.begin_cancel(t.task_id))
        assert (intent.from_state, intent.approvals, intent.already) == (
            S.AwaitingApproval,
            [a.approval_id],
            False,
        )
        assert run(store.tasks.get(t.task_id)).payload == p.Cancelling(
            cancelled_from=S.AwaitingApproval, step=1
        )
        assert run(store.questions.approval(a.approval_id)).status is ApprovalStatus.withdrawn
        with pytest.raises(AlreadyDecided, match="withdrawn"):
            run(
                store.questions.decide_approval(
                    a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
                )
            )
        for late in (p.Executing(current_step=1), p.Synthesizing(), p.Failed()):
            with pytest.raises(IllegalTransition):
                run(store.tasks.transition(t.task_id, late, point=None))
        again = run(store.tasks.begin_cancel(t.task_id))
        assert (again.from_state, again.already) == (S.AwaitingApproval, True)

    def test_finish_cancel_cuts_off_running_steps_once(self, store: Store) -> None:
        t = self.created(store, p.Executing(current_step=3))
        run(store.tasks.step_started(b.step(t.task_id, 3)))
        run(store.tasks.begin_cancel(t.task_id))
        with pytest.raises(IllegalTransition):
            run(store.tasks.step_started(b.step(t.task_id, 4)))
        msg = b.message(f"cancelled:{t.task_id}", task_id=t.task_id)
        assert run(store.tasks.finish_cancel(t.task_id, msg)) == [3]
        task = run(store.tasks.get(t.task_id))
        assert (task.state, task.error) == (S.Cancelled, CANCELLED_ERROR)
        (row,) = run(store.tasks.steps(t.task_id))
        assert row.status is StepStatus.cancelled and row.completed_at is not None
        assert run(store.tasks.steps_in_flight()) == {}
        assert run(store.tasks.finish_cancel(t.task_id, b.message("second"))) is None
        assert run(store.events.pending()) == [msg]
        with pytest.raises(TaskStateRefused):
            run(store.tasks.begin_cancel(t.task_id))

    def test_finish_cancel_needs_the_intent(self, store: Store) -> None:
        t = self.created(store, p.Executing())
        with pytest.raises(IllegalTransition):
            run(store.tasks.finish_cancel(t.task_id, b.message("x")))
        assert run(store.tasks.get(t.task_id)) == t
        assert run(store.events.pending()) == []

    def test_fail_ends_a_task_with_its_error(self, store: Store) -> None:
        t = self.created(store, p.Synthesizing())
        run(store.tasks.fail(t.task_id, "model gone", [b.message("f", task_id=t.task_id)]))
        task = run(store.tasks.get(t.task_id))
        assert (task.state, task.error) == (S.Failed, "model gone")
        assert [m.message_key for m in run(store.events.pending())] == ["f"]

    # -- the outbox ---------------------------------------------------------------------

    def test_a_message_key_is_sent_once(self, store: Store) -> None:
        m = b.message("result:x", "result", "hi")
        run(store.events.enqueue([m]))
        run(store.events.enqueue([replace(m, body="changed")]))
        assert run(store.events.pending()) == [m]
        store.events.mark_delivered(["result:x"])  # outside a loop: committed at once
        assert run(store.events.pending()) == []
        run(store.events.enqueue([m]))  # a resend after delivery is still a no-op
        assert run(store.events.pending()) == []

    def test_pending_messages_keep_their_order(self, store: Store) -> None:
        msgs = [b.message(f"k{i}", body=str(i)) for i in (3, 1, 2)]
        for m in msgs:
            run(store.events.enqueue([m]))
        assert run(store.events.pending()) == msgs

    def test_mark_delivered_rides_on_the_next_commit(self, store: Store) -> None:
        run(store.events.enqueue([b.message("a"), b.message("b")]))

        async def go() -> None:
            store.events.mark_delivered(["a"])
            await store.events.enqueue([b.message("c")])

        run(go())
        assert [m.message_key for m in run(store.events.pending())] == ["b", "c"]

    def test_supersede_old_prompts_keeps_the_reports(self, store: Store) -> None:
        run(store.events.enqueue([b.message("q", "approval"), b.message("r", "report")]))
        run(store.events.enqueue([b.message("c", "credential")]))
        assert run(store.questions.supersede_old_prompts()) == 2
        assert [m.message_key for m in run(store.events.pending())] == ["r"]

    # -- recovery ------------------------------------------------------------------------

    def test_apply_recovery_is_one_commit(self, store: Store) -> None:
        gone = self.created(store, p.Executing(current_step=1))
        ask = self.created(store, p.Executing(current_step=2))
        held = self.created(store, p.Planning(pause_requested=True))
        ending = self.created(store, p.Cancelling(cancelled_from=S.Executing, step=0))
        again = self.created(store, p.Extracting())
        a = b.approval(ask.task_id, step=2)
        parked = p.AwaitingApproval(approval_id=a.approval_id, step=2)
        prompt = b.message(f"approval:{a.approval_id}:1", "approval", task_id=ask.task_id)
        report = b.message("report:boot-1", "report")
        run(
            store.tasks.apply_recovery(
                abandon=[(gone.task_id, "died twice")],
                attempted=[again.task_id, again.task_id],
                messages=[report, prompt],
                park=[(a, parked)],
                pause=[held.task_id],
                cancel=[ending.task_id],
            )
        )
        g = run(store.tasks.get(gone.task_id))
        assert (g.state, g.error) == (S.Abandoned, "died twice")
        assert run(store.tasks.get(ask.task_id)).payload == parked
        assert run(store.questions.approval(a.approval_id)).prompts_sent == 1
        assert run(store.tasks.get(held.task_id)).payload == p.Paused(then=p.Planning())
        assert run(store.tasks.get(ending.task_id)).state is S.Cancelled
        assert run(store.tasks.get(again.task_id)).recovery_attempts == 2
        assert run(store.events.pending()) == [report, prompt]

    def test_apply_recovery_refused_in_part_writes_nothing(self, store: Store) -> None:
        gone = self.created(store, p.Executing())
        done = self.created(store, p.Completed())
        again = self.created(store)
        with pytest.raises(IllegalTransition):
            run(
                store.tasks.apply_recovery(
                    abandon=[(gone.task_id, "x"), (done.task_id, "y")],
                    attempted=[again.task_id],
                    messages=[b.message("report")],
                )
            )
        for t in (gone, done, again):
            assert run(store.tasks.get(t.task_id)) == t
        assert run(store.events.pending()) == []

    # -- group commit ----------------------------------------------------------------------

    def test_concurrent_writes_all_land_and_a_refusal_undoes_only_itself(
        self, store: Store
    ) -> None:
        tasks = [self.created(store) for _ in range(48)]
        runners = [self.created(store, p.Executing()) for _ in range(16)]
        commits0 = self.commits_made(store)

        async def go() -> list[Any]:
            moves = [
                # every third move is illegal (Extracting -> Completed)
                store.tasks.transition(
                    t.task_id, p.Completed() if i % 3 == 0 else p.Planning(), point=None
                )
                for i, t in enumerate(tasks)
            ]
            steps = [
                store.tasks.step_finished(
                    b.step(t.task_id, 0, StepStatus.completed, i), next_step=1
                )
                for i, t in enumerate(runners)
            ]
            news = [
                store.tasks.create(b.task(event_id=f"g{i}"), b.event(f"g{i}")) for i in range(16)
            ]
            mail = [store.events.enqueue([b.message(f"g:{i}")]) for i in range(16)]
            return await asyncio.gather(*moves, *steps, *news, *mail, return_exceptions=True)

        results = run(go())
        for i, (t, r) in enumerate(zip(tasks, results, strict=False)):
            if i % 3 == 0:
                assert isinstance(r, IllegalTransition), r
                assert run(store.tasks.get(t.task_id)) == t
            else:
                assert r is S.Planning
                assert run(store.tasks.get(t.task_id)).state is S.Planning
        steps = results[len(tasks) : len(tasks) + len(runners)]
        assert steps == [S.Executing] * len(runners)
        for t in runners:
            assert run(store.tasks.get(t.task_id)).current_step == 1
            assert run(store.tasks.step(t.task_id, 0)) is not None
        news = results[len(tasks) + len(runners) : -16]
        assert [created for _, created in news] == [True] * 16
        assert results[-16:] == [None] * 16
        assert len(run(store.events.pending())) == 16
        assert len(run(store.tasks.listing(limit=1000))) == 48 + 16 + 16
        commits = self.commits_made(store)
        if commits is not None and commits0 is not None:
            assert commits - commits0 < len(results), "concurrent writes share commits"

    # -- reads for recovery ----------------------------------------------------------------

    def test_unfinished_returns_unfinished_tasks_only_oldest_first(self, store: Store) -> None:
        wanted = []
        base = datetime.now(UTC) - timedelta(hours=1)
        for i, state in enumerate([S.Completed, S.Executing, S.Failed, S.Paused, S.Cancelled] * 3):
            at = rfc3339(base + timedelta(seconds=i))
            t = b.task(state, updated_at=at)
            run(store.tasks.create(t))
            if not state.terminal:
                wanted.append(t.task_id)
        got, malformed = run(store.tasks.unfinished())
        assert [t.task_id for t in got] == wanted
        assert malformed == []
        self.check_unfinished_reads_an_index(store)

    def test_counts_and_listing_by_state(self, store: Store) -> None:
        for state in (S.Executing, S.Executing, S.Failed):
            self.created(store, b.task(state).payload)
        assert run(store.tasks.counts()) == {"Executing": 2, "Failed": 1}
        assert {t.state for t in run(store.tasks.listing(["Failed"]))} == {S.Failed}
        assert len(run(store.tasks.listing(["Executing", "Failed"]))) == 3

    # -- adapters, boots, model calls ------------------------------------------------------

    def test_adapter_state_is_replaced_whole(self, store: Store) -> None:
        assert run(store.adapters.get("telegram")) is None
        run(store.adapters.put("telegram", {"offset": 1, "chat": "x"}))
        run(store.adapters.put("telegram", {"offset": 2}))
        assert run(store.adapters.get("telegram")) == {"offset": 2}

    def test_boots_start_and_end(self, store: Store) -> None:
        assert run(store.events.last_boot()) is None
        run(store.events.start_boot("boot-1", 123, "0.0"))
        boot = run(store.events.last_boot())
        assert boot is not None and boot["boot_id"] == "boot-1" and not boot["clean"]
        run(store.events.end_boot("boot-1"))
        boot = run(store.events.last_boot())
        assert boot is not None and boot["clean"] and boot["ended_at"] is not None

    # -- retention: history is pruned in bounded batches -------------------------------

    def test_cleanup_takes_a_tasks_model_calls_with_it_in_batches(self, store: Store) -> None:
        finished = [self.created(store) for _ in range(3)]
        for t in finished:
            run(store.tasks.fail(t.task_id, "done with"))
            store.tasks.record_llm_call(_llm_call(t.task_id))
        store.tasks.record_llm_call(_llm_call("a-task-deleted-long-ago"))
        live = self.created(store)
        store.tasks.record_llm_call(_llm_call(live.task_id))
        later = rfc3339(datetime.now(UTC) + timedelta(days=1))
        first = run(store.tasks.cleanup(later, later, batch=2))
        assert first >= 2  # a full batch: the caller calls again
        while run(store.tasks.cleanup(later, later, batch=2)) >= 2:
            pass
        assert run(store.tasks.cleanup(later, later, batch=2)) == 0
        for t in finished:
            with pytest.raises(UnknownTask):
                run(store.tasks.get(t.task_id))
            assert run(store.tasks.llm_usage(t.task_id))["calls"] == 0
        assert run(store.tasks.llm_usage("a-task-deleted-long-ago"))["calls"] == 0
        assert run(store.tasks.llm_usage(live.task_id))["calls"] == 1  # a live task keeps its

    def test_prune_drops_ended_deliveries_and_old_boots_in_batches(self, store: Store) -> None:
        run(store.adapters.register_channels(["chat"]))
        run(store.events.enqueue([b.message(k) for k in ("sent", "failed", "pending", "doubt")]))
        run(store.adapters.sent("chat", "sent", "r-1"))
        run(store.adapters.failed("chat", "failed", "refused"))
        run(store.adapters.sending("chat", "doubt"))
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

    def test_a_model_call_is_journaled_before_it_goes_out(self, store: Store) -> None:
        t = self.created(store, p.Planning())
        run(store.tasks.llm_request_sent(t.task_id, "plan"))
        payload = run(store.tasks.get(t.task_id)).payload
        assert isinstance(payload, p.Planning) and payload.llm_request is not None
        assert payload.llm_request.phase == "plan"
        call = {
            "task_id": t.task_id,
            "provider": "scripted",
            "model": "m",
            "input_tokens": 10,
            "output_tokens": 5,
            "time_to_first_token": 0.1,
            "total_time": 0.2,
            "cost_usd": 0.5,
            "queued_seconds": 0.0,
        }
        store.tasks.record_llm_call(call)  # outside a loop: committed at once
        assert run(store.tasks.llm_usage(t.task_id)) == {
            "calls": 1,
            "input_tokens": 10,
            "output_tokens": 5,
            "cost_usd": 0.5,
        }

    # -- durability --------------------------------------------------------------------------

    def test_what_was_committed_survives_a_reopen(self, store_path: Path) -> None:
        store_path.mkdir()
        s = self.make_store(store_path)
        t = self.created(s)
        run(s.tasks.transition(t.task_id, p.Planning(), point=None, update=TaskUpdate(error="e")))
        s.close()
        s2 = self.make_store(store_path)
        try:
            got = run(s2.tasks.get(t.task_id))
            assert (got.state, got.error) == (S.Planning, "e")
        finally:
            s2.close()
        assert self.integrity_problems(store_path) == []

    @pytest.mark.crash
    def test_every_acknowledged_write_survives_a_sigkill(self, store_path: Path) -> None:
        """A child opens the store, commits writes (concurrently: group commit) and says
        so on stdout after each one; it is SIGKILLed mid-stream. Every write it said was
        committed is there when the store is opened again, and the database is whole."""
        store_path.mkdir()
        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.contract.crash_writer", self.opener, str(store_path)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        acks: list[str] = []
        try:
            assert child.stdout is not None
            while len(acks) < 120:
                raw = child.stdout.readline()
                if not raw.endswith(b"\n"):
                    break
                acks.append(raw.decode())
        finally:
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, err.decode()
        assert len(acks) >= 120, err.decode()
        # what it printed before it died: a torn last line is no acknowledgement
        tail = out.decode().split("\n")
        acks += [line + "\n" for line in tail[:-1]]
        created: set[str] = set()
        planned: dict[str, int] = {}
        for line in acks:
            verb, task_id, *rest = line.split()
            if verb == "created":
                created.add(task_id)
            else:
                assert verb == "planned", line
                planned[task_id] = int(rest[0])
        assert planned, "the child acknowledged no transition"
        assert self.integrity_problems(store_path) == []
        s = self.make_store(store_path)
        try:
            for task_id in created:
                run(s.tasks.get(task_id))  # raises UnknownTask if an acknowledged create was lost
            for task_id, n in planned.items():
                got = run(s.tasks.get(task_id))
                assert got.state is S.Planning, task_id
                assert got.extracted_metadata == {"n": n}
        finally:
            s.close()
        assert self.integrity_problems(store_path) == []


def _llm_call(task_id: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "provider": "scripted",
        "model": "m",
        "input_tokens": 1,
        "output_tokens": 1,
        "time_to_first_token": 0.1,
        "total_time": 0.2,
        "cost_usd": 0.0,
        "queued_seconds": 0.0,
    }


def _moving_columns(t: TaskRecord) -> dict[str, Any]:
    """The columns a transition writes: the contract compares the rest as created."""
    return dict.fromkeys(
        (
            "state",
            "payload",
            "phase",
            "plan",
            "execute_progress",
            "extracted_metadata",
            "template_hash",
            "error",
            "updated_at",
        )
    )


__all__ = ["RICH_PAYLOADS", "StoreContract"]


def _release(store: Store, holder: str) -> None:
    """Let `holder`'s locks go (a release rides on the next commit: one is made)."""
    store.locks.release(holder)
    run(store.locks.renew("no-such-boot", 1))
