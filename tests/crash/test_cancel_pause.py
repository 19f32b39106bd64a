"""Cancel, pause and resume of pipeline tasks and traced workflows, through the real `pfar`
command and a real kernel: a running command's process group is ended, a kernel killed
right after the intent to cancel was committed finishes the cancel at its next start, a
paused task stays paused across a SIGKILL, and a question to the owner is withdrawn."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from pfar.journal import payloads
from pfar.vault.home import Home

from ..support import (
    make_home,
    owner_messages,
    pfar,
    read_journal,
    running_kernel,
    said,
    step_statuses,
    task_approvals,
    task_record,
    task_states,
    wait_for,
    wait_for_file,
)
from .test_regressions import (
    boot,
    boot_report,
    kernel,
    lines_of,
    plan,
    script,
    submit,
    template,
    wait_state,
)

pytestmark = pytest.mark.crash

TITLE = "Long job"


def _gone(pgid: int) -> bool:
    """No live process is left in the group (a zombie has ended: only reaping is left)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):  # state, pgrp
            return False
    return True


def _long_job(tmp_path: Path, *, approval: bool = False) -> tuple[Home, Path, Path]:
    """Step 1 starts a long `sleep` (in a child, so a whole group must be ended); step 2
    would create `marker`."""
    log, marker = tmp_path / "ran.log", tmp_path / "step2.marker"
    extra = '[approval]\nrequire = ["shell.run"]\n' if approval else ""
    extra += "[timeouts]\nstep_seconds = 120\n"
    home = make_home(
        tmp_path / "home",
        templates={"long": template("long", TITLE, ["shell.run"], extra)},
        script=script(
            plan(
                "long",
                [
                    ("shell.run", {"argv": ["sh", "-c", f"echo started >> {log}; sleep 60"]}),
                    ("shell.run", {"argv": ["touch", str(marker)]}),
                ],
            )
        ),
    )
    return home, log, marker


def _step_pid(home: Home, task_id: str, step: int = 0) -> int:
    """The pid of the process the running step started, once it is journaled."""

    def recorded() -> int | None:
        found = read_journal(home, lambda s: s.tasks.started_processes(task_id))
        return next((p["pid"] for _, n, p in found if n == step), None)

    return int(wait_for(recorded, what="the step's process to be recorded"))


def _cut_off(home: Home, task_id: str) -> None:
    assert step_statuses(home, task_id) == {0: "cancelled"}  # no row for step 2: it never started
    found = read_journal(home, lambda s: s.tasks.step(task_id, 0))
    assert found is not None and found.error is not None
    error = found.error
    assert "cut off by the owner's cancel while it ran" in error
    assert "may have had (some of) its effects" in error


@pytest.mark.both_backends
def test_cancel_ends_the_running_command_and_no_further_step_runs(tmp_path: Path) -> None:
    home, log, marker = _long_job(tmp_path)
    with running_kernel(home) as k:
        tid = submit(k, "long")
        wait_for(log.exists, what="step 1 to start")
        pid = _step_pid(home, tid)
        assert not _gone(pid)

        r = pfar(home, "cancel", tid[:8])
        assert r.returncode == 0, said(r)
        assert said(r).startswith(f"task {tid} Cancelled")
        assert "step 1 was cut off while it ran: it may have had (some of) its effects" in said(r)

        assert task_states(home)[tid] == "Cancelled"  # acknowledged means committed
        wait_for(lambda: _gone(pid), what="the step's process group to be gone")
        _cut_off(home, tid)
        assert task_record(home, tid).error == "cancelled by the owner"
        time.sleep(0.5)
        assert not marker.exists(), "a step ran after the cancel"
        notice = wait_for(
            lambda: [m for m in owner_messages(home) if m["key"] == f"cancelled:{tid}"],
            what="the owner's notice",
        )
        assert notice[0]["body"] == (
            f"Task {TITLE} ({tid[:8]}) was cancelled. Step 1 of 2 (shell.run) was cut off "
            "while it ran: it may have had (some of) its effects."
        )

        # an ended task: a clear refusal naming its state, and nothing changes
        for verb, action in (("cancel", "cancelled"), ("pause", "paused"), ("resume", "resumed")):
            again = pfar(home, verb, tid)
            assert again.returncode == 1, said(again)
            assert f"task {tid} is Cancelled: it has already ended, so it cannot be {action}" in (
                said(again)
            )
        listed = pfar(home, "tasks", "--state", "Cancelled", "--json")
        assert [t["task_id"] for t in json.loads(listed.stdout)] == [tid]
        shown = said(pfar(home, "task", "show", tid[:8]))
        assert "step 1/2 shell.run (step 1): cancelled: cut off by the owner's cancel" in shown
        assert "now Cancelled: cancelled by the owner" in shown
        assert "shell.run cut off by a cancel" in pfar(home, "task", "trace", tid).stdout
        assert k.proc.poll() is None
    assert log.read_text().split() == ["started"]
    assert not marker.exists()


@pytest.mark.both_backends
def test_a_kill_after_the_cancel_intent_finishes_the_cancel_at_the_next_start(
    tmp_path: Path,
) -> None:
    home, log, marker = _long_job(tmp_path)
    with kernel(home, fault="cancel_intended") as k:
        tid = submit(k, "long")
        wait_for(log.exists, what="step 1 to start")
        pid = _step_pid(home, tid)
        r = pfar(home, "cancel", tid)
        assert r.returncode != 0  # the kernel died under the request
        assert k.killed_by_fault(), k.output()
    # the intent is durable; the command outlived the kernel
    assert task_states(home)[tid] == "Cancelling"
    assert step_statuses(home, tid) == {0: "started"}
    assert not _gone(pid)

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert report == (
            "System restarted. Recovery report:\n"
            f" - 1 task cancelled, as the owner asked before the restart ({TITLE})\n"
            " - 1 orphaned process cleaned up"
        )
        wait_for(lambda: _gone(pid), what="the command to be ended")
        assert task_states(home)[tid] == "Cancelled"
        _cut_off(home, tid)
        time.sleep(0.5)
        assert task_states(home)[tid] == "Cancelled"
        notice = [m for m in owner_messages(home) if m["key"] == f"cancelled:{tid}"]
        assert len(notice) == 1 and "Step 1 of 2 (shell.run) was cut off" in notice[0]["body"]
    # never resumed: step 1 did not run again, step 2 never ran
    assert log.read_text().split() == ["started"]
    assert not marker.exists()


@pytest.mark.both_backends
def test_a_paused_task_stays_paused_across_a_kill_and_resumes_where_it_was(
    tmp_path: Path,
) -> None:
    log = tmp_path / "ran.log"
    gate = tmp_path / "go"  # step 1 runs until the pause is in, however busy the machine
    home = make_home(
        tmp_path / "home",
        templates={"three": template("three", "Three steps", ["shell.run"])},
        script=script(
            plan(
                "three",
                [
                    (
                        "shell.run",
                        {
                            "argv": [
                                "sh",
                                "-c",
                                f"echo one >> {log}; {wait_for_file(gate)}",
                            ]
                        },
                    ),
                    ("shell.run", {"argv": ["sh", "-c", f"echo two >> {log}"]}),
                    ("shell.run", {"argv": ["sh", "-c", f"echo three >> {log}"]}),
                ],
            )
        ),
    )
    k = boot(home)
    try:
        tid = submit(k, "three")
        wait_for(log.exists, what="step 1 to start")
        r = pfar(home, "pause", tid[:8])
        assert r.returncode == 0, said(r)
        assert said(r) == (
            f"task {tid} (Executing) will pause when its current step ends; "
            "`pfar tasks --state Paused` lists it then"
        )
        gate.touch()
        # the running step is not cut: it finishes, and the task stops before the next
        wait_state(home, tid, "Paused")
        assert step_statuses(home, tid) == {0: "completed"}
        paused = payloads.Paused(then=payloads.Executing(current_step=1))
        assert task_record(home, tid).payload == paused
        again = pfar(home, "pause", tid)
        assert said(again) == f"task {tid} is already Paused; nothing changed"
        listed = pfar(home, "tasks", "--state", "Paused", "--json")
        assert [t["task_id"] for t in json.loads(listed.stdout)] == [tid]
    finally:
        k.kill()
    assert log.read_text().split() == ["one"]

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert report == "System restarted. Recovery report:\n - 1 task left paused (Three steps)"
        time.sleep(1.0)
        assert task_states(home)[tid] == "Paused"
        assert log.read_text().split() == ["one"]  # nothing ran while it was paused

        r = pfar(home, "resume", tid[:8])
        assert r.returncode == 0, said(r)
        assert said(r) == f"task {tid} resumes (Executing)"
        wait_state(home, tid, "Completed")
    assert log.read_text().split() == ["one", "two", "three"]
    assert step_statuses(home, tid) == {0: "completed", 1: "completed", 2: "completed"}


@pytest.mark.both_backends
def test_cancelling_a_task_parked_on_an_approval_withdraws_the_question(tmp_path: Path) -> None:
    home, log, marker = _long_job(tmp_path, approval=True)
    with running_kernel(home) as k:
        tid = submit(k, "long")
        wait_state(home, tid, "AwaitingApproval")
        approval_id = task_approvals(home, tid)[0].approval_id
        r = pfar(home, "pause", tid)  # parked: it holds nothing already
        assert r.returncode == 1
        assert "is AwaitingApproval: it is waiting for the owner's answer" in said(r)

        r = pfar(home, "cancel", tid)
        assert r.returncode == 0, said(r)
        assert said(r) == f"task {tid} Cancelled withdrawn: question {approval_id[:8]}"
        question = read_journal(home, lambda s: s.questions.approval(approval_id))
        assert (question.status, question.decision) == ("withdrawn", None)

        later = pfar(home, "approve", approval_id[:8])
        assert later.returncode == 1
        assert f"approval {approval_id} is already withdrawn at " in said(later)
        assert "because its task was cancelled; nothing was changed" in said(later)
        assert task_states(home)[tid] == "Cancelled"
        notice = wait_for(
            lambda: [m for m in owner_messages(home) if m["key"] == f"cancelled:{tid}"],
            what="the owner's notice",
        )
        assert notice[0]["body"] == (
            f"Task {TITLE} ({tid[:8]}) was cancelled. Its question [{approval_id[:8]}] "
            "is withdrawn."
        )
        listed = pfar(home, "approvals", "--all", "--json")
        assert [a["status"] for a in json.loads(listed.stdout)["approvals"]] == ["withdrawn"]
        assert k.proc.poll() is None
    assert not log.exists() and not marker.exists()  # the command never ran


# -- traced workflows ---------------------------------------------------------------

WORKFLOW = """
    name = "build"

    [[steps]]
    name = "prepare"
    run = ["sh", "-c", "echo prepared >> ran.log; echo Prepared"]

    [[steps]]
    name = "compile"
    run = ["sh", "-c", "echo compile >> ran.log; $COMPILE"]

    [[steps]]
    name = "ship"
    run = ["sh", "-c", "echo shipped >> ran.log; echo Shipped"]
"""


def _workflow(tmp_path: Path, compile_cmd: str) -> tuple[Home, Path, Path]:
    home = make_home(tmp_path / "home", script="")
    definition = tmp_path / "build.toml"
    definition.write_text(textwrap.dedent(WORKFLOW).replace("$COMPILE", compile_cmd))
    work = tmp_path / "work"
    work.mkdir()
    return home, definition, work


def _workflow_task(home: Home, definition: Path, work: Path) -> str:
    r = pfar(home, "workflow", "start", str(definition), str(work))
    assert r.returncode == 0, said(r)
    # "workflow task <id> started in <directory>": said once the task is committed
    return r.stdout.split()[2]


@pytest.mark.both_backends
def test_cancelling_a_running_workflow_ends_its_command_and_says_so_in_the_trace(
    tmp_path: Path,
) -> None:
    home, definition, work = _workflow(tmp_path, "sleep 60")
    with running_kernel(home) as k:
        tid = _workflow_task(home, definition, work)
        wait_for(lambda: "compile" in lines_of(work / "ran.log"), what="compile to start")
        pid = _step_pid(home, tid, step=1)  # the compile step's

        r = pfar(home, "cancel", tid[:8])
        assert r.returncode == 0, said(r)
        assert "step 2 was cut off while it ran" in said(r)
        assert task_states(home)[tid] == "Cancelled"
        wait_for(lambda: _gone(pid), what="the step's process group to be gone")
        assert step_statuses(home, tid) == {0: "completed", 1: "cancelled"}
        trace = (work / "trace.md").read_text()
        assert "compile cut off: the task was cancelled while it ran" in trace
        time.sleep(0.5)
        assert k.proc.poll() is None
    assert (work / "ran.log").read_text().split() == ["prepared", "compile"]  # ship never ran


@pytest.mark.both_backends
def test_cancelling_a_workflow_parked_on_a_question_withdraws_it(tmp_path: Path) -> None:
    home, definition, work = _workflow(tmp_path, "exit 3")
    with running_kernel(home):
        tid = _workflow_task(home, definition, work)
        wait_state(home, tid, "AwaitingApproval")
        approval_id = task_approvals(home, tid)[0].approval_id
        r = pfar(home, "cancel", tid)
        assert r.returncode == 0, said(r)
        assert said(r) == f"task {tid} Cancelled withdrawn: question {approval_id[:8]}"
        later = pfar(home, "answer", approval_id, "retry")
        assert later.returncode == 1
        assert "withdrawn" in said(later) and "because its task was cancelled" in said(later)
        assert task_states(home)[tid] == "Cancelled"
        resumed = pfar(home, "resume", tid)
        assert resumed.returncode == 1
        assert f"task {tid} is Cancelled: it has already ended" in said(resumed)
    assert (work / "ran.log").read_text().split() == ["prepared", "compile"]


@pytest.mark.both_backends
def test_a_paused_workflow_survives_a_kill_and_resume_goes_on_from_its_trace(
    tmp_path: Path,
) -> None:
    # compile waits for the test's word, so the pause always comes while it runs
    # (a fixed sleep lost that race on a loaded machine: the task had Completed)
    home, definition, work = _workflow(
        tmp_path,
        f"{wait_for_file('go')}; echo Compiled",
    )
    k = boot(home)
    try:
        tid = _workflow_task(home, definition, work)
        wait_for(lambda: "compile" in lines_of(work / "ran.log"), what="compile to start")
        r = pfar(home, "pause", tid)
        assert r.returncode == 0, said(r)
        (work / "go").touch()
        wait_state(home, tid, "Paused")
        assert step_statuses(home, tid) == {0: "completed", 1: "completed"}
    finally:
        k.kill()
    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert " - 1 task left paused (" in report
        time.sleep(1.0)
        assert task_states(home)[tid] == "Paused"
        assert (work / "ran.log").read_text().split() == ["prepared", "compile"]
        r = pfar(home, "resume", tid)
        assert r.returncode == 0, said(r)
        wait_state(home, tid, "Completed")
    assert (work / "ran.log").read_text().split() == ["prepared", "compile", "shipped"]
