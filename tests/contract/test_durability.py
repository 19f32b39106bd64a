"""Durability: concurrent writes share commits and a refusal undoes only itself; what was
committed survives a reopen, and every acknowledged write survives a SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import (
    IllegalTransition,
    WriteRefused,
)
from pfar.journal import (
    StepStatus,
    TaskState,
    TaskUpdate,
)
from pfar.journal import payloads as p
from pfar.journal.records import TaskRecord
from pfar.journal.store import Store

from . import builders as b
from .backends import Backend
from .helpers import created, run
from .verbs import covers

S = TaskState
REPO = Path(__file__).resolve().parents[2]


# -- group commit ----------------------------------------------------------------------


@covers("tasks.transition", "tasks.step_finished", "tasks.create", "events.enqueue")
def test_concurrent_writes_all_land_and_a_refusal_undoes_only_itself(
    store: Store, backend: Backend
) -> None:
    tasks = [created(store) for _ in range(48)]
    runners = [created(store, p.Executing()) for _ in range(16)]
    commits0 = backend.commits_made(store)

    async def go() -> list[Any]:
        moves = [
            # every third move is illegal (Extracting -> Completed)
            store.tasks.transition(
                t.task_id, p.Completed() if i % 3 == 0 else p.Planning(), point=None
            )
            for i, t in enumerate(tasks)
        ]
        steps = [
            store.tasks.step_finished(b.step(t.task_id, 0, StepStatus.completed, i), next_step=1)
            for i, t in enumerate(runners)
        ]
        news = [store.tasks.create(b.task(event_id=f"g{i}"), b.event(f"g{i}")) for i in range(16)]
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
    commits = backend.commits_made(store)
    if commits is not None and commits0 is not None:
        assert commits - commits0 < len(results), "concurrent writes share commits"


def _finish_first_steps(store: Store, runners: list[TaskRecord], *others: Any) -> list[Any]:
    """Each runner's step 0 finished, all at once (one commit, or few), with `others`
    (awaitables) sent among them; every result, an error as itself."""

    async def go() -> list[Any]:
        steps: list[Any] = [
            store.tasks.step_finished(b.step(t.task_id, 0, StepStatus.completed, i), next_step=1)
            for i, t in enumerate(runners)
        ]
        for i, other in enumerate(others):
            steps.insert(3 + 4 * i, other)
        return await asyncio.gather(*steps, return_exceptions=True)

    return run(go())


@covers("tasks.step_finished", "tasks.request_pause")
def test_a_pause_lands_on_its_step_in_a_commit_shared_with_others(
    store: Store, backend: Backend
) -> None:
    """A step's progress is written on a guard that nearly always holds (still
    Executing, no pause asked for); a backend that sends a batch's statements ahead of
    their results checks it when the batch settles. Where it missed, that write takes
    the other road (the pause lands) and its neighbours are what they would have been."""
    runners = [created(store, p.Executing()) for _ in range(12)]
    pausing = runners[5]
    run(store.tasks.request_pause(pausing.task_id, running=lambda: True))
    commits0 = backend.commits_made(store)
    results = _finish_first_steps(store, runners)
    assert results == [S.Paused if t is pausing else S.Executing for t in runners]
    for t in runners:
        got = run(store.tasks.get(t.task_id))
        assert got.state is (S.Paused if t is pausing else S.Executing)
        assert got.current_step == 1 and run(store.tasks.step(t.task_id, 0)) is not None
    commits = backend.commits_made(store)
    if commits is not None and commits0 is not None:
        assert commits - commits0 < len(runners), "the steps shared commits"


@covers("tasks.step_finished", "tasks.llm_request_sent", "tasks.create")
def test_a_write_refused_in_a_shared_commit_is_told_to_its_own_caller(store: Store) -> None:
    """Refusals found as a statement is read (a guard that raises) or only when the
    batch settles (a duplicate id the server refuses) reach their own callers; the
    writes sent before and after them commit."""
    runners = [created(store, p.Executing()) for _ in range(12)]
    done = created(store, p.Completed())
    results = _finish_first_steps(
        store,
        runners,
        store.tasks.llm_request_sent(done.task_id, "synthesize"),
        store.tasks.create(replace(b.task(), task_id=runners[0].task_id)),
    )
    late_call, dup = results.pop(3), results.pop(6)
    assert isinstance(late_call, IllegalTransition), late_call
    assert isinstance(dup, WriteRefused), dup
    assert results == [S.Executing] * len(runners)
    for t in runners:
        assert run(store.tasks.get(t.task_id)).current_step == 1
    assert run(store.tasks.get(done.task_id)).payload == p.Completed()


# -- durability --------------------------------------------------------------------------


@covers("tasks.create", "tasks.transition", "tasks.get")
def test_what_was_committed_survives_a_reopen(
    open_store: Callable[[Path], Store], store_path: Path, backend: Backend
) -> None:
    s = open_store(store_path)
    t = created(s)
    run(s.tasks.transition(t.task_id, p.Planning(), point=None, update=TaskUpdate(error="e")))
    backend.close(s)
    s2 = open_store(store_path)
    try:
        got = run(s2.tasks.get(t.task_id))
        assert (got.state, got.error) == (S.Planning, "e")
    finally:
        backend.close(s2)
    assert backend.integrity_problems(store_path) == []


@covers("tasks.get")
@pytest.mark.crash
def test_every_acknowledged_write_survives_a_sigkill(
    open_store: Callable[[Path], Store], store_path: Path, backend: Backend
) -> None:
    """A child opens the store, commits writes (concurrently: group commit) and says
    so on stdout after each one; it is SIGKILLed mid-stream. Every write it said was
    committed is there when the store is opened again, and the database is whole."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.contract.crash_writer", backend.opener, str(store_path)],
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
    made: set[str] = set()
    planned: dict[str, int] = {}
    for line in acks:
        verb, task_id, *rest = line.split()
        if verb == "created":
            made.add(task_id)
        else:
            assert verb == "planned", line
            planned[task_id] = int(rest[0])
    assert planned, "the child acknowledged no transition"
    assert backend.integrity_problems(store_path) == []
    s = open_store(store_path)
    try:
        for task_id in made:
            run(s.tasks.get(task_id))  # raises UnknownTask if an acknowledged create was lost
        for task_id, n in planned.items():
            got = run(s.tasks.get(task_id))
            assert got.state is S.Planning, task_id
            assert got.extracted_metadata == {"n": n}
    finally:
        backend.close(s)
    assert backend.integrity_problems(store_path) == []
