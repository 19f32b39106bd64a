"""Recovery's harder edges: a crash-looping task, a template changed under a running task,
a planned tool that no longer exists. The kernel runs as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfar.journal.payloads import AwaitingApproval
from pfar.journal.records import TaskUpdate

from ..support import (
    KernelProcess,
    make_home,
    owner_messages,
    pfar,
    read_journal,
    running_kernel,
    step_statuses,
    task_approvals,
    task_record,
    task_states,
    wait_for,
    write_journal,
)

# every test here runs on each journal backend
pytestmark = [pytest.mark.crash, pytest.mark.both_backends]

SLOW_NOTE = """
    id = "slow_note"
    description = "Slow note"
    allowed_tools = ["file.write", "file.read"]
"""

SCRIPT = """
    [[responses]]
    template = "slow_note"
    phase = "plan"
    [[responses.json.steps]]
    tool = "file.write"
    args = { path = "a.txt", content = "one" }
    [[responses.json.steps]]
    tool = "file.write"
    args = { path = "b.txt", content = "two" }

    [[responses]]
    phase = "synthesize"
    text = "ok"
"""


def test_task_whose_recovery_keeps_crashing_the_kernel_is_parked_on_a_question(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"slow_note": SLOW_NOTE},
        script=SCRIPT,
        # kernel deaths in a row with the task in flight: the first below, then three
        config="[recovery]\nmax_recovery_attempts = 4\n",
    )
    first = KernelProcess(home, fault="step_completed")
    first.wait_ready()
    task_id = first.request("submit", template="slow_note", text="x")["task_id"]
    assert first.killed_by_fault()

    # Each start recovers the task and dies right after journaling that decision:
    # a task that crashes the kernel during its recovery, again and again.
    for attempt in range(1, 4):
        k = KernelProcess(home, fault="recovery_decided")
        assert k.killed_by_fault(), k.output()
        assert task_record(home, task_id).recovery_attempts == attempt

    with running_kernel(home):
        row = wait_for(
            lambda: (r := task_record(home, task_id)).state == "AwaitingApproval" and r,
            what="the crash-looping task to be parked on a question",
        )
        # never abandoned on a guess: the owner is asked, and nothing runs meanwhile
        assert isinstance(row.payload, AwaitingApproval) and row.payload.in_flight is not None
        assert row.payload.in_flight.then.kind == "Executing"
        assert row.recovery_attempts == 0
        (q,) = task_approvals(home, task_id)
        assert q.action_type == "in_flight_deaths"
        assert q.options == ["resume", "abandon"]
        reports = [m["body"] for m in owner_messages(home) if m["kind"] == "report"]
        wait_for(
            lambda: any(
                "1 task parked: in flight during 4 kernel deaths in a row with no progress; "
                "the owner is asked to resume or abandon (Slow note)" in m["body"]
                for m in owner_messages(home)
                if m["kind"] == "report"
            ),
            what="the report",
        )
    assert len(reports) >= 1
    assert task_record(home, task_id).state == "AwaitingApproval"


def test_template_changed_under_a_running_task_asks_the_owner(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"slow_note": SLOW_NOTE}, script=SCRIPT)
    k = KernelProcess(home, fault="step_completed")
    k.wait_ready()
    task_id = k.request("submit", template="slow_note", text="x")["task_id"]
    assert k.killed_by_fault()
    (home.templates_dir / "slow_note.toml").write_text(
        SLOW_NOTE.replace('"Slow note"', '"Slow note, edited"')
    )

    with running_kernel(home) as k2:
        row = wait_for(
            lambda: (r := task_record(home, task_id)).state == "AwaitingApproval" and r,
            what="the question about the changed template",
        )
        assert isinstance(row.payload, AwaitingApproval)
        approval_id = row.payload.approval_id
        a = read_journal(home, lambda s: s.questions.approval(approval_id))
        assert a.action_type == "template_changed"
        assert a.options == ["continue", "fail"]
        k2.request("answer", approval_id=approval_id, decision="continue")
        wait_for(lambda: task_record(home, task_id).state == "Completed", what="completion")
    workspace = home.workspace(task_id)
    assert (workspace / "a.txt").read_text() == "one"
    assert (workspace / "b.txt").read_text() == "two"
    assert len(step_statuses(home, task_id)) == 2


def test_planned_tool_that_no_longer_exists_asks_instead_of_crashing(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"slow_note": SLOW_NOTE}, script=SCRIPT)
    k = KernelProcess(home, fault="step_completed")
    k.wait_ready()
    task_id = k.request("submit", template="slow_note", text="x")["task_id"]
    assert k.killed_by_fault()
    # An upgrade renamed the tool: the journaled plan (data) still names the old one.
    # Journaled as a task's own move in place would be (a self-loop keeps its step).
    row = task_record(home, task_id)
    assert row.state == "Executing" and row.plan is not None
    plan = json.loads(json.dumps(row.plan))
    plan["steps"][1]["tool"] = "file.write_v0"
    write_journal(
        home,
        lambda s: s.tasks.transition(
            task_id, row.payload, point=None, update=TaskUpdate(plan=plan), reset_attempts=False
        ),
    )

    with running_kernel(home) as k2:
        row = wait_for(
            lambda: (r := task_record(home, task_id)).state == "AwaitingApproval" and r,
            what="the question about the missing tool",
        )
        assert isinstance(row.payload, AwaitingApproval)
        k2.request("answer", approval_id=row.payload.approval_id, decision="skip")
        wait_for(lambda: task_record(home, task_id).state == "Completed", what="completion")
        assert k2.proc.poll() is None
    assert step_statuses(home, task_id) == {0: "completed", 1: "skipped"}


def test_a_report_after_a_flood_names_each_title_once_with_its_count(tmp_path: Path) -> None:
    templates = {
        f"t{i}": f'id = "t{i}"\ndescription = "{title}"\nallowed_tools = ["file.write"]\n'
        for i, title in enumerate(["Morning digest", *(f"Job {n}" for n in range(6))])
    }
    home = make_home(
        tmp_path / "home",
        templates=templates,
        # every plan takes long: all tasks are in Planning when the kernel is killed
        script='[[responses]]\nphase = "plan"\ndelay_seconds = 60\njson = { steps = [] }\n',
        config="[recovery]\nshutdown_timeout_seconds = 0\n",
    )
    first = KernelProcess(home)
    try:
        first.wait_ready()
        ids = [first.request("submit", template="t0", text=f"d{i}")["task_id"] for i in range(200)]
        ids += [first.request("submit", template=f"t{i}", text="x")["task_id"] for i in range(1, 7)]
        wait_for(
            lambda: task_states(home) == dict.fromkeys(ids, "Planning"),
            what="every task to be planning",
        )
    finally:
        first.kill()

    second = KernelProcess(home)
    try:
        second.wait_ready()
        boot_id = second.request("ping")["boot_id"]
        (report,) = wait_for(
            lambda: [m["body"] for m in owner_messages(home) if m["key"] == f"report:{boot_id}"],
            what="the recovery report",
        )
    finally:
        second.kill()
    lines = report.splitlines()
    assert lines[0] == "System restarted. Recovery report:"
    assert len(lines) == 2, report
    head, _, names = lines[1].partition(" (")
    assert head == " - 206 tasks retried"
    listed = names.removesuffix(")").split(", ")
    # the first 5 distinct titles, the flood's once with its count, then the rest counted
    assert listed[0] == "Morning digest ×200"
    assert len(listed) == 6 and all(n.startswith("Job ") for n in listed[1:5]), listed
    assert listed[5:] == ["and 2 more"], listed


def test_a_write_in_doubt_is_said_to_ask_the_owner_by_dry_run_and_report(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home = make_home(
        tmp_path / "home",
        templates={
            "cmd": 'id = "cmd"\ndescription = "Run a command"\nallowed_tools = ["shell.run"]\n'
        },
        script=f"""
            [[responses]]
            template = "cmd"
            phase = "plan"
            json = {{ steps = [ {{ tool = "shell.run", args = {{ argv = ["sh", "-c",
                "echo ran >> {log}"] }} }} ] }}
        """,
    )
    # killed right after the shell step's "started" is durable: did it run? nobody knows
    first = KernelProcess(home, fault="step_started:1")
    first.wait_ready()
    task_id = first.request("submit", template="cmd", text="go")["task_id"]
    assert first.killed_by_fault(), first.output()

    dry = pfar(home, "recover", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    (decision,) = json.loads(dry.stdout)["decisions"]
    assert decision["task_id"] == task_id
    assert decision["action"] == "AskOwner"
    assert decision["reason"] == (
        "the write in flight (shell.run, step 1 of 1) may have happened: "
        "the owner will be asked to retry, skip or fail it"
    )
    human = pfar(home, "recover", "--dry-run")
    assert "AskOwner" in " ".join(human.stdout.split()), human.stdout

    before = log.read_text() if log.exists() else ""
    with running_kernel(home) as k:
        boot_id = k.request("ping")["boot_id"]
        (report,) = wait_for(
            lambda: [m["body"] for m in owner_messages(home) if m["key"] == f"report:{boot_id}"],
            what="the recovery report",
        )
        assert report == (
            "System restarted. Recovery report:\n"
            " - 1 task resumed at a write in doubt: the owner is asked to retry, skip or fail "
            "(Run a command — step 1 of 1)"
        )
        # ... and that is what happens: the owner is asked, nothing runs meanwhile
        asked = wait_for(
            lambda: [
                m
                for m in owner_messages(home)
                if m["kind"] == "approval" and m["task_id"] == task_id
            ],
            what="the owner to be asked",
        )
        assert "I was interrupted while executing 'shell.run'" in asked[0]["body"]
        (q,) = task_approvals(home, task_id)
        assert q.action_type == "write_in_doubt"
        assert q.options == ["retry", "skip", "fail"]
        assert task_record(home, task_id).state == "AwaitingApproval"
    assert (log.read_text() if log.exists() else "") == before
