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

from pfar.errors import IllegalTransition
from pfar.journal import Journal, TaskRecord, TaskState
from pfar.journal.records import now_rfc3339
from pfar.journal.states import LEGAL, TERMINAL, UNFINISHED, check_transition, is_legal

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
    assert {TaskState.Completed, TaskState.Failed, TaskState.Abandoned} == TERMINAL
    assert set(TaskState) == TERMINAL | UNFINISHED
    assert not TERMINAL & UNFINISHED
    assert {s for s in TaskState if s.terminal} == TERMINAL


def test_parked_states_are_exactly_the_two_waits() -> None:
    assert {s for s in TaskState if s.parked} == {
        TaskState.AwaitingApproval,
        TaskState.AwaitingCredential,
    }
    assert not any(s.parked for s in TERMINAL)


def test_every_state_is_reachable_from_extracting() -> None:
    assert _reachable(TaskState.Extracting) == set(TaskState)


@given(states)
def test_every_unfinished_state_can_reach_a_terminal_state(src: TaskState) -> None:
    if src.terminal:
        return
    assert _reachable(src) & TERMINAL
    # and failing is always one step away: no unfinished state is a trap
    assert TaskState.Failed in LEGAL[src]
    assert TaskState.Abandoned in LEGAL[src]


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
    for dst in attempts:
        if dst in LEGAL[current]:
            assert is_legal(current, dst)
            check_transition(tid, current, dst)  # does not raise
            current = dst
        else:
            assert not is_legal(current, dst)
            with pytest.raises(IllegalTransition) as info:
                check_transition(tid, current, dst)
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
        j = Journal.open(Path(d) / "sessions.db", create=True, synchronous="NORMAL")
        try:
            yield j
        finally:
            j.close()


def _task(task_id: str) -> TaskRecord:
    now = now_rfc3339()
    return TaskRecord(
        task_id=task_id,
        template_id="t",
        principal="owner",
        trigger_event={"text": "hello"},
        state=TaskState.Extracting,
        detail={},
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
        await j.create(_task(tid))
        model = TaskState.Extracting
        for n, dst in enumerate(attempts):
            before = j.task(tid)
            assert before.state is model
            if is_legal(model, dst):
                await j.transition(tid, dst, point=None, detail={"current_step": n}, error=f"e{n}")
                model = dst
                after = j.task(tid)
                assert after.state is dst
                assert after.detail == {"current_step": n}
                assert after.error == f"e{n}"
                assert after.phase == (dst.phase or before.phase)
                assert after.updated_at >= before.updated_at
            else:
                with pytest.raises(IllegalTransition) as info:
                    await j.transition(tid, dst, point=None, detail={"x": 1}, error="nope")
                assert (info.value.task_id, info.value.src, info.value.dst) == (
                    tid,
                    model.value,
                    dst.value,
                )
                # the refused transition left the row exactly as it was
                assert j.task(tid) == before

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

    async def go() -> list[BaseException | None]:
        await j.create(_task(tid))
        results = await asyncio.gather(
            *(j.transition(tid, dst, point=None, error=f"e{n}") for n, dst in enumerate(attempts)),
            return_exceptions=True,
        )
        return list(results)

    results = asyncio.run(go())
    model = TaskState.Extracting
    last_ok = None
    for n, (dst, result) in enumerate(zip(attempts, results, strict=True)):
        if is_legal(model, dst):
            assert result is None, (n, dst, result)
            model = dst
            last_ok = n
        else:
            assert isinstance(result, IllegalTransition), (n, dst, result)
            assert result.src == model.value
    final = j.task(tid)
    assert final.state is model
    assert final.error == (None if last_ok is None else f"e{last_ok}")


def test_unknown_task_transition_is_refused(shared_journal: Journal) -> None:
    from pfar.errors import UnknownTask

    with pytest.raises(UnknownTask, match="no-such-task"):
        asyncio.run(shared_journal.transition("no-such-task", TaskState.Planning, point=None))
