"""Property tests of the task state machine: the pure table, then a real Journal on SQLite."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pfar.errors import IllegalTransition, TaskStateRefused
from pfar.journal import Journal, OwnerMessage, TaskRecord, TaskState, TaskUpdate
from pfar.journal.holds import PauseOutcome, ResumeOutcome
from pfar.journal.message_keys import CancelledKey, MessageKind
from pfar.journal.payloads import (
    Extracting,
    Paused,
    Payload,
    Planning,
    Queued,
    Working,
    pause_requested,
    paused_from,
)
from pfar.journal.records import now_rfc3339
from pfar.journal.sqlite import open_journal
from pfar.journal.states import (
    LEGAL,
    TERMINAL,
    UNFINISHED,
    WORKING,
    check_transition,
    is_legal,
)
from tests.support import payload_for

S = TaskState

states = st.sampled_from(list(TaskState))
task_ids = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=20
)


def _reachable(src: TaskState) -> set[TaskState]:
    seen = {src}
    todo = deque([src])
    while todo:
        s = todo.popleft()
        for nxt in LEGAL[s]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# -- the table -------------------------------------------------------------------


def test_legal_covers_every_state_and_nothing_else() -> None:
    assert set(LEGAL) == set(TaskState)
    for src, dsts in LEGAL.items():
        assert dsts <= set(TaskState), src


def test_terminal_and_unfinished_partition_the_states() -> None:
    assert {S.Completed, S.Failed, S.Abandoned, S.Cancelled} == TERMINAL
    assert set(TaskState) == TERMINAL | UNFINISHED
    assert not TERMINAL & UNFINISHED
    assert {s for s in TaskState if s.terminal} == TERMINAL


def test_parked_states_are_exactly_the_waits_on_the_owner_or_a_subtask() -> None:
    assert {s for s in TaskState if s.parked} == {
        TaskState.AwaitingApproval,
        TaskState.AwaitingCredential,
        TaskState.WaitingForUser,  # a loop task's turn passed to the owner
        TaskState.Blocked,  # a loop task's Task call waiting on its subtask
    }
    assert not any(s.parked for s in TERMINAL)


def test_every_state_is_reachable_from_extracting() -> None:
    assert _reachable(TaskState.Extracting) == set(TaskState)


@given(states)
def test_every_unfinished_state_can_reach_a_terminal_state(src: TaskState) -> None:
    if src.terminal:
        return
    assert _reachable(src) & TERMINAL
    if src.held:
        return
    # and failing is always one step away: no state a runner or the owner's question
    # holds is a trap
    assert S.Failed in LEGAL[src]
    assert S.Abandoned in LEGAL[src]


@given(states)
def test_every_unfinished_state_can_be_cancelled_and_only_through_cancelling(
    src: TaskState,
) -> None:
    """The owner can cancel any unfinished task, and always by committing the intent
    (Cancelling) first: Cancelled is never one step from anywhere else."""
    if src.terminal:
        assert S.Cancelling not in LEGAL[src]
    elif src is S.Cancelling:
        assert LEGAL[src] == {S.Cancelled}  # a cancel, once intended, only finishes
    else:
        assert S.Cancelling in LEGAL[src]
    assert (S.Cancelled in LEGAL[src]) == (src is S.Cancelling)


def test_cancelled_is_terminal_and_absorbing() -> None:
    assert S.Cancelled.terminal and LEGAL[S.Cancelled] == frozenset()
    assert not S.Cancelling.terminal and S.Cancelling in UNFINISHED


def test_only_working_states_can_be_paused() -> None:
    """Never a task parked on the owner (it holds nothing), never an ended or cancelling one;
    a working one, or one queued for a slot (which holds nothing either, and no answer)."""
    assert {s for s in TaskState if S.Paused in LEGAL[s]} == WORKING | {S.Queued}
    assert {s for s in TaskState if s.working} == WORKING
    assert not (WORKING & {s for s in TaskState if s.parked or s.held or s.terminal})


@given(states, st.sampled_from([*TaskState, None]))
def test_paused_returns_only_where_it_came_from_or_to_cancelling(
    dst: TaskState, came_from: TaskState | None
) -> None:
    ok = is_legal(S.Paused, dst, came_from)
    assert ok == (dst is S.Cancelling or (dst.working and dst is came_from))
    if not ok:
        with pytest.raises(IllegalTransition):
            check_transition("t", S.Paused, dst, came_from)


@given(st.sampled_from(sorted(WORKING)), states)
def test_pause_then_resume_is_a_round_trip(src: TaskState, dst: TaskState) -> None:
    assert is_legal(src, S.Paused)
    assert is_legal(S.Paused, dst, src) == (dst in (src, S.Cancelling))


@given(states, states, task_ids)
def test_terminal_states_are_absorbing(src: TaskState, dst: TaskState, task_id: str) -> None:
    if not src.terminal:
        return
    assert LEGAL[src] == frozenset()
    with pytest.raises(IllegalTransition) as info:
        check_transition(task_id, src, dst)
    assert info.value.src == src.value and info.value.dst == dst.value


@given(st.lists(states, max_size=40), task_ids)
def test_any_sequence_from_extracting_follows_legal(attempts: list[TaskState], tid: str) -> None:
    current = TaskState.Extracting
    came_from: TaskState | None = None  # where a Paused task was paused from
    for dst in attempts:
        if dst in LEGAL[current] and (
            current not in (S.Paused, S.Queued) or not dst.working or dst is came_from
        ):
            assert is_legal(current, dst, came_from)
            check_transition(tid, current, dst, came_from)  # does not raise
            came_from = _came_from(current, dst, came_from)
            current = dst
        else:
            assert not is_legal(current, dst, came_from)
            with pytest.raises(IllegalTransition) as info:
                check_transition(tid, current, dst, came_from)
            err = info.value
            assert (err.task_id, err.src, err.dst) == (tid, current.value, dst.value)
            msg = str(err)
            assert tid in msg and current.value in msg and dst.value in msg
            assert msg == f"task {tid}: cannot go from {current.value} to {dst.value}"
        # the machine can always still finish from where it is
        assert current.terminal or _reachable(current) & TERMINAL


@given(states)
def test_phase_names_follow_the_spec(s: TaskState) -> None:
    assert s.phase in {"extract", "plan", "execute", "synthesize", "egress", ""}
    if s.parked:
        assert s.phase == "execute"


# -- the same machine, enforced by a real journal ---------------------------------


@contextmanager
def _journal() -> Iterator[Journal]:
    with tempfile.TemporaryDirectory() as d:
        j = open_journal(Path(d) / "sessions.db", create=True, synchronous="NORMAL")
        try:
            yield j
        finally:
            j.close()


def _came_from(model: TaskState, dst: TaskState, came_from: TaskState | None) -> TaskState | None:
    """Where a task that moves from `model` to `dst` goes back to once let go (paused or
    queued from a working state; paused while queued: where it was queued from)."""
    if dst is S.Paused and model is S.Queued:
        return came_from
    return model if dst in (S.Paused, S.Queued) else None


def _payload(dst: TaskState, current: TaskState = S.Extracting, step: int = 0) -> Payload:
    """What a move into `dst` from `current` carries (a pause holds the state it is in)."""
    if dst in (S.Paused, S.Queued):
        then = payload_for(current if current.working else S.Executing, step)
        assert isinstance(then, Working)
        return Paused(then=then) if dst is S.Paused else Queued(then=then, priority=step)
    return payload_for(dst, step)


def _task(task_id: str) -> TaskRecord:
    now = now_rfc3339()
    return TaskRecord(
        task_id=task_id,
        template_id="t",
        principal="owner",
        trigger_event={"text": "hello"},
        state=TaskState.Extracting,
        payload=Extracting(),
        phase=TaskState.Extracting.phase,
        plan=None,
        execute_progress=None,
        extracted_metadata=None,
        data_ceiling="internal",
        output_sinks=["owner"],
        trace_id=None,
        created_at=now,
        updated_at=now,
        error=None,
        event_id=None,
        template_hash="",
        recovery_attempts=0,
    )


@pytest.fixture(scope="module")
def shared_journal() -> Iterator[Journal]:
    with _journal() as j:
        yield j


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(states, min_size=1, max_size=25))
def test_journal_stores_what_the_model_says(
    shared_journal: Journal, attempts: list[TaskState]
) -> None:
    j = shared_journal
    tid = str(uuid.uuid4())

    async def go() -> None:
        await j.tasks.create(_task(tid))
        model = TaskState.Extracting
        came_from: TaskState | None = None
        for n, dst in enumerate(attempts):
            before = await j.tasks.get(tid)
            assert before.state is model
            to = _payload(dst, model, n)
            if dst is S.Paused and isinstance(before.payload, Queued):
                to = Paused(then=before.payload.then)  # it goes back where it was queued
            if is_legal(model, dst, came_from):
                await j.tasks.transition(tid, to, point=None, update=TaskUpdate(error=f"e{n}"))
                came_from = _came_from(model, dst, came_from)
                model = dst
                after = await j.tasks.get(tid)
                assert after.state is dst
                # the journal keeps the payload, and where a paused task goes back to
                assert after.payload == to
                assert paused_from(after.payload) is came_from
                assert after.error == f"e{n}"
                assert after.phase == (dst.phase or before.phase)
                assert after.updated_at >= before.updated_at
            else:
                with pytest.raises(IllegalTransition) as info:
                    await j.tasks.transition(tid, to, point=None, update=TaskUpdate(error="nope"))
                assert (info.value.task_id, info.value.src, info.value.dst) == (
                    tid,
                    model.value,
                    dst.value,
                )
                # the refused transition left the row exactly as it was
                assert await j.tasks.get(tid) == before

    asyncio.run(go())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(states, min_size=1, max_size=30))
def test_concurrent_transitions_apply_in_order_and_refusals_undo_only_themselves(
    shared_journal: Journal, attempts: list[TaskState]
) -> None:
    """Many transitions of one task in flight at once share group commits; each is checked
    against the row as it is inside the transaction, in submission order."""
    j = shared_journal
    tid = str(uuid.uuid4())

    # what each move carries, from the state the model says it finds (in submission order)
    moves: list[Payload] = []
    model = TaskState.Extracting
    came_from: TaskState | None = None
    queued: Queued | None = None
    for dst in attempts:
        to = _payload(dst, model)
        if dst is S.Paused and model is S.Queued and queued is not None:
            to = Paused(then=queued.then)  # it goes back where it was queued
        moves.append(to)
        if is_legal(model, dst, came_from):
            if isinstance(to, Queued):
                queued = to
            came_from, model = _came_from(model, dst, came_from), dst

    async def go() -> list[BaseException | TaskState]:
        await j.tasks.create(_task(tid))
        results = await asyncio.gather(
            *(
                j.tasks.transition(tid, to, point=None, update=TaskUpdate(error=f"e{n}"))
                for n, to in enumerate(moves)
            ),
            return_exceptions=True,
        )
        return list(results)

    results = asyncio.run(go())
    model = TaskState.Extracting
    came_from = None
    last_ok = None
    for n, (dst, result) in enumerate(zip(attempts, results, strict=True)):
        if is_legal(model, dst, came_from):
            assert result is dst, (n, dst, result)  # the state it is in now
            came_from = _came_from(model, dst, came_from)
            model = dst
            last_ok = n
        else:
            assert isinstance(result, IllegalTransition), (n, dst, result)
            assert result.src == model.value
    final = asyncio.run(j.tasks.get(tid))
    assert final.state is model
    assert final.error == (None if last_ok is None else f"e{last_ok}")


def test_unknown_task_transition_is_refused(shared_journal: Journal) -> None:
    from pfar.errors import UnknownTask

    with pytest.raises(UnknownTask, match="no-such-task"):
        asyncio.run(shared_journal.tasks.transition("no-such-task", Planning(), point=None))


# -- the owner's holds (pause, resume, cancel), enforced by a real journal ----------

# an owner's request, or a runner's move into a state (a runner's own moves, along the
# pipeline, drawn more often: a pause request is honoured at such a move)
owner_ops = st.one_of(
    st.sampled_from(["pause_running", "pause_running", "pause_idle", "unpause", "cancel"]),
    st.sampled_from([S.Planning, S.Executing, S.Synthesizing, S.Completed]),
    states,
)


class _Model:
    """What the journal must hold after each step: state, where a Paused task goes back,
    and whether a running task's pause request stands."""

    def __init__(self) -> None:
        self.state = S.Extracting
        self.came_from: TaskState | None = None
        self.requested = False

    def move(self, dst: TaskState) -> bool:
        if not is_legal(self.state, dst, self.came_from):
            return False
        if dst is S.Paused:
            if self.state is not S.Queued:  # paused while queued: back where it was queued
                self.came_from = self.state
        elif dst is S.Queued:
            self.came_from = self.state
            if self.requested:  # being queued is a boundary: the pause lands there
                dst = S.Paused
        elif self.requested and dst is not self.state and dst.working:
            # a runner's move while a pause request stands: that boundary is where it stops
            self.came_from, dst = dst, S.Paused
        else:
            self.came_from = None
        if dst is not self.state:
            self.requested = False
        self.state = dst
        return True

    def refuses_pause(self) -> bool:
        return self.state.terminal or self.state.parked or self.state is S.Cancelling


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(owner_ops, min_size=1, max_size=25))
def test_holds_follow_the_model(shared_journal: Journal, ops: list[object]) -> None:
    """Pause (of a running task, or of one no coroutine holds), resume and cancel, mixed
    with a runner's moves: the journal ends where the model says, a refusal changes
    nothing, a Paused task goes back only where it was paused, and once Cancelling no
    runner move lands."""
    j = shared_journal
    tid = str(uuid.uuid4())

    async def go() -> None:
        await j.tasks.create(_task(tid))
        m = _Model()
        for op in ops:
            before = await j.tasks.get(tid)
            if isinstance(op, TaskState):
                to = _payload(op, m.state)
                if op is S.Paused and isinstance(before.payload, Queued):
                    to = Paused(then=before.payload.then)
                if m.move(op):
                    await j.tasks.transition(tid, to, point=None)
                else:
                    with pytest.raises(IllegalTransition):
                        await j.tasks.transition(tid, to, point=None)
                    assert await j.tasks.get(tid) == before
            elif op in ("pause_running", "pause_idle"):
                running = op == "pause_running"
                if m.refuses_pause():
                    with pytest.raises(TaskStateRefused) as info:
                        await j.tasks.request_pause(tid, running=lambda r=running: r)
                    assert info.value.state == m.state.value and tid in str(info.value)
                    assert await j.tasks.get(tid) == before
                    continue
                state, outcome = await j.tasks.request_pause(tid, running=lambda r=running: r)
                if m.state is S.Queued:  # it holds nothing while it waits: paused at once
                    assert outcome is PauseOutcome.paused
                    m.move(S.Paused)
                elif m.state is S.Paused or (running and m.requested):
                    assert outcome is PauseOutcome.already
                elif running:
                    assert outcome is PauseOutcome.requested
                    m.requested = True
                else:
                    assert outcome is PauseOutcome.paused
                    m.move(S.Paused)
                assert state is m.state
            elif op == "unpause":
                if m.state is S.Paused:
                    back = m.came_from
                    assert back is not None
                    state, outcome = await j.tasks.unpause(tid)
                    assert (state, outcome) == (back, ResumeOutcome.resumed)
                    m.move(back)
                elif m.state.working and m.requested:
                    state, outcome = await j.tasks.unpause(tid)
                    assert (state, outcome) == (m.state, ResumeOutcome.withdrawn)
                    m.requested = False
                else:
                    with pytest.raises(TaskStateRefused):
                        await j.tasks.unpause(tid)
                    assert await j.tasks.get(tid) == before
            else:  # cancel: the intent, then the end
                if m.state.terminal:
                    with pytest.raises(TaskStateRefused) as info:
                        await j.tasks.begin_cancel(tid)
                    assert info.value.state == m.state.value
                    continue
                intent = await j.tasks.begin_cancel(tid)
                assert intent.already == (m.state is S.Cancelling)
                m.move(S.Cancelling)
                assert (await j.tasks.get(tid)).state is S.Cancelling
                # a runner's move after the intent is refused: the task is the owner's
                for late in WORKING:
                    with pytest.raises(IllegalTransition):
                        await j.tasks.transition(tid, _payload(late), point=None)
                await j.tasks.finish_cancel(
                    tid, OwnerMessage(CancelledKey(tid), MessageKind.notice, "x", tid)
                )
                m.move(S.Cancelled)
            row = await j.tasks.get(tid)
            assert row.state is m.state
            assert paused_from(row.payload) == (
                m.came_from if m.state in (S.Paused, S.Queued) and m.came_from else None
            )
            assert pause_requested(row.payload) == m.requested

    asyncio.run(go())


@given(states, states)
def test_the_owners_retry_is_the_only_way_out_of_failed_and_leads_only_back_to_work(
    src: TaskState, dst: TaskState
) -> None:
    """`pfar task retry`: Failed -> a working state, and only with `retrying` (no runner's
    move can make it); a retry moves no other state."""
    assert is_legal(src, dst, retrying=True) == (src is S.Failed and dst.working)
    if src is S.Failed:
        assert not is_legal(src, dst)
