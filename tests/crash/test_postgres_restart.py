"""PostgreSQL restarted under load: the journal's server goes away while tasks are being
submitted and run, and comes back.

The kernel's journal is on a cluster of the test's own (tests/crash/pg_cluster.py).
While a stream of tasks is submitted, each running several cheap writing steps, the
cluster is restarted: `-m fast` (every session is ended first) and `-m immediate` (a
crash of the server: the next start replays its WAL). The kernel may stop (fail-stop:
it exits saying the journal's server went away, with no traceback) or go on; started
again with the server back, it recovers. Then, read through the store: every task whose
creation was acknowledged, and every step seen completed before the restart, is still
there; every task is Completed; and no step's write happened twice (each shell step
appends a line of its own to a file, per run).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pfar.journal.records import StepStatus, TaskRecord
from pfar.journal.states import TaskState
from pfar.journal.store import Store
from pfar.vault.home import Home

from ..support import KernelProcess, make_home, read_journal, wait_for
from .pg_cluster import Cluster, own_cluster

pytestmark = [pytest.mark.crash, pytest.mark.slow]

N_TASKS = 30
N_STEPS = 6
SHELL_STEPS = (0, 2, 4)  # the others write a file (idempotent by check)
# submissions acknowledged before the server is restarted
ACKED_BEFORE_RESTART = 8

TEMPLATE = """
    id = "burst"
    description = "Writes a little, several times"
    allowed_tools = ["shell.run", "file.write"]
    [timeouts]
    step_seconds = 20
"""


def _script(effects: Path) -> str:
    steps = []
    for i in range(N_STEPS):
        if i in SHELL_STEPS:
            shell = f'echo "$PFAR_TASK_ID:{i}" >> {effects}'
            steps.append(f"{{ tool = \"shell.run\", args = {{ argv = ['sh', '-c', '{shell}'] }} }}")
        else:
            steps.append(
                f'{{ tool = "file.write", args = {{ path = "out{i}.txt", '
                f'content = "step {i} of $input\\n" }} }}'
            )
    lines = ",\n  ".join(steps)
    return f"""
[[responses]]
template = "burst"
phase = "plan"
[responses.json]
steps = [
  {lines},
]

[[responses]]
template = "burst"
phase = "synthesize"
text = "burst $input done"
"""


@dataclass
class Journal:
    """What the store says: each task's state and its steps done (completed, or skipped
    by the owner: a write in doubt that had happened)."""

    states: dict[str, TaskState] = field(default_factory=dict)
    done: dict[str, set[int]] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # task id -> its text


def _look(home: Home) -> Journal:
    async def read(s: Store) -> Journal:
        seen = Journal()
        for task in await s.tasks.listing(limit=10_000):
            assert isinstance(task, TaskRecord), task
            seen.states[task.task_id] = task.state
            seen.inputs[task.task_id] = str((task.trigger_event or {}).get("text"))
            seen.done[task.task_id] = {
                st.step
                for st in await s.tasks.steps(task.task_id)
                if st.status in (StepStatus.completed, StepStatus.skipped)
            }
        return seen

    return read_journal(home, read)


class Submitter(threading.Thread):
    """Submits tasks one after another, as an adapter would, until one is refused
    (the kernel stopped under it); what each acknowledged submission returned is kept."""

    def __init__(self, k: KernelProcess, inputs: list[str]) -> None:
        super().__init__(daemon=True)
        self.k = k
        self.inputs = inputs
        self.acked: dict[str, str] = {}  # input -> task id
        self.refused: str | None = None

    def run(self) -> None:
        for text in self.inputs:
            try:
                r = self.k.request("submit", template="burst", text=text, event_id=f"ev-{text}")
            except Exception as exc:
                self.refused = f"{type(exc).__name__}: {exc}"
                return
            self.acked[text] = r["task_id"]
            time.sleep(0.02)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster() as c:
        yield c


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_restarted_under_load(tmp_path: Path, cluster: Cluster, mode: str) -> None:
    effects = tmp_path / "effects.log"
    home = make_home(
        tmp_path / "home",
        templates={"burst": TEMPLATE},
        script=_script(effects),
        postgres_dsn=cluster.create_database("pfar"),
    )
    inputs = [f"{mode}-{i}" for i in range(N_TASKS)]

    k = KernelProcess(home)
    try:
        k.wait_ready()
        submitter = Submitter(k, inputs)
        submitter.start()
        wait_for(
            lambda: len(submitter.acked) >= ACKED_BEFORE_RESTART or not submitter.is_alive(),
            what="submissions acknowledged",
        )
        assert submitter.refused is None, (submitter.refused, k.output())
        # what the store holds now is committed: the restart may not take any of it back
        before = _look(home)
        acked_before = dict(submitter.acked)
        cluster.restart(mode)
        submitter.join(timeout=60)
        assert not submitter.is_alive(), "a submission hung across the restart"
        first_code = _first_boot_ends(k, home)
    finally:
        if k.proc.poll() is None:
            k.kill()
    out = k.output()
    print(
        f"{mode}: {len(acked_before)} acknowledged before the restart, "
        f"{len(submitter.acked)} in all; refused: {submitter.refused}; "
        f"first boot ended with {first_code}; steps completed before: "
        f"{sum(len(s) for s in before.done.values())}"
    )
    print(out[-3000:])
    assert "Traceback" not in out, out
    if first_code != 0:
        # fail-stop: one line that says the journal's server went away, and its exit code
        assert first_code == 3, out
        assert "fail-stop" in out, out
        assert f"127.0.0.1:{cluster.port}" in out, out
        assert "sessions.db" not in out, out  # the home's SQLite file is not the journal

    # the server is back: the next start recovers, and every event is delivered again
    # (an adapter does not know which ones were taken)
    cluster.wait_accepting()
    second = KernelProcess(home)
    try:
        second.wait_ready()
        for text in inputs:
            got = second.request("submit", template="burst", text=text, event_id=f"ev-{text}")
            # an event taken before the restart is the same task, never a second one
            assert submitter.acked.get(text, got["task_id"]) == got["task_id"], text
        answered = _settle(second, home, effects, len(inputs))
        print(f"{mode}: writes in doubt answered after the restart: {answered}")
        assert second.terminate() == 0, second.output()
    finally:
        if second.proc.poll() is None:
            second.kill()
    assert "Traceback" not in second.output(), second.output()

    after = _look(home)
    assert sorted(after.inputs.values()) == sorted(inputs)  # one task per event
    # every acknowledged creation is still there
    for text, task_id in submitter.acked.items():
        assert after.inputs.get(task_id) == text, (text, task_id)
    # every task and completed step seen before the restart is still there
    for task_id, steps in before.done.items():
        assert task_id in after.states, task_id
        assert steps <= after.done[task_id], (task_id, steps, after.done[task_id])
    assert after.states == {t: TaskState.Completed for t in after.states}, after.states
    assert after.done == {t: set(range(N_STEPS)) for t in after.states}
    # no step's write happened twice (nor was lost)
    runs = Counter(effects.read_text().split())
    assert runs == Counter(f"{t}:{i}" for t in after.states for i in SHELL_STEPS), {
        line: n for line, n in runs.items() if n != 1
    }
    for task_id, text in after.inputs.items():
        for i in set(range(N_STEPS)) - set(SHELL_STEPS):
            written = (home.workspace(task_id) / f"out{i}.txt").read_text()
            assert written == f"step {i} of {text}\n"


def _first_boot_ends(k: KernelProcess, home: Home) -> int:
    """The kernel that saw the server go away either stops by itself (fail-stop) or goes
    on; one that goes on is stopped once its tasks are done. Its exit code."""
    try:
        return k.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    # it went on: it must still answer, and finish what it took
    k.request("ping")
    wait_for(
        lambda: all(s.terminal for s in _look(home).states.values()),
        timeout=60,
        what="the tasks of a kernel that went on",
    )
    return k.terminate()


def _settle(k: KernelProcess, home: Home, effects: Path, n_tasks: int) -> list[str]:
    """Wait until every task is terminal, answering each write in doubt as the owner
    would, from the evidence: a shell step whose line is in the file ran. The answers."""
    answered: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert k.proc.poll() is None, k.output()
        for question in read_journal(home, lambda s: s.questions.approvals()):
            assert question.action_type == "write_in_doubt", question
            assert question.step in SHELL_STEPS, question
            ran = effects.exists() and f"{question.task_id}:{question.step}" in (
                effects.read_text().split()
            )
            decision = "skip" if ran else "retry"
            k.request("answer", approval_id=question.approval_id, decision=decision)
            answered.append(decision)
        seen = _look(home)
        if len(seen.states) == n_tasks and all(s.terminal for s in seen.states.values()):
            return answered
        time.sleep(0.2)
    raise AssertionError(f"tasks not settled: {_look(home).states}\n{k.output()[-3000:]}")
