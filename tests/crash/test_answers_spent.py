"""An owner's answer is spent once: it covers exactly one run of the step it answered.

Every test here kills the kernel twice, before the answer and during the run the answer
started, and checks that the next start asks a new question instead of applying the old
answer again: for pipeline tasks (retry, skip, approve) and for traced workflows (rerun,
skip). The steps append to a log, so the runs are counted, not guessed.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.journal.owner_records import ApprovalRecord
from pfar.vault.home import Home

from ..integration.test_bad_input import pfar
from ..support import (
    RecordingServer,
    make_home,
    owner_messages,
    step_statuses,
    task_approvals,
    task_record,
    wait_for,
)
from .test_regressions import (
    kernel,
    lines_of,
    plan,
    quiet,
    script,
    shell_append,
    submit,
    template,
    wait_state,
)

pytestmark = pytest.mark.crash


def _questions(home: Home, task_id: str) -> dict[str, ApprovalRecord]:
    """Every question asked about the task, by approval id."""
    return {q.approval_id: q for q in task_approvals(home, task_id)}


def _pending(home: Home, task_id: str) -> list[ApprovalRecord]:
    return [q for q in _questions(home, task_id).values() if q.status == "pending"]


def _asked_again_or_ran(home: Home, task_id: str, log: Path, runs: int) -> ApprovalRecord:
    """After the second kill: the one pending question, failing at once if the step ran
    more than `runs` times meanwhile (the old answer applied again)."""
    wait_for(
        lambda: _pending(home, task_id) or len(lines_of(log)) > runs,
        what="a new question (or the step to run again without one)",
    )
    assert len(lines_of(log)) == runs, f"ran again without asking: {lines_of(log)}"
    (question,) = _pending(home, task_id)
    return question


def _not_completed(home: Home, task_id: str) -> None:
    assert task_record(home, task_id).state == "AwaitingApproval"
    assert not [m for m in owner_messages(home) if m["kind"] == "result"]


# -- pipeline tasks -------------------------------------------------------------------


def _pipeline(tmp_path: Path, steps: list[tuple[str, dict[str, Any]]], extra: str = "") -> Home:
    return make_home(
        tmp_path / "home",
        templates={"ann": template("ann", "Announce", ["shell.run", "http.request"], extra)},
        script=script(plan("ann", steps)),
    )


@pytest.mark.both_backends
def test_a_retry_of_a_write_in_doubt_is_spent_by_the_run_it_starts(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home = _pipeline(tmp_path, [("shell.run", shell_append(log, "announce", "sleep 30"))])
    with kernel(home) as k:
        tid = submit(k, "ann")
        wait_for(lambda: lines_of(log) == ["announce"], what="the write to start")
        k.kill()  # before the answer: the write is in doubt

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (first,) = _pending(home, tid)
        assert first.action_type == "write_in_doubt"
        k.request("answer", approval_id=first.approval_id, decision="retry")
        wait_for(lambda: len(lines_of(log)) == 2, what="the retried write to start")
        k.kill()  # during the run the retry started

    with kernel(home):
        again = _asked_again_or_ran(home, tid, log, runs=2)
        assert again.approval_id != first.approval_id
        assert again.action_type == "write_in_doubt" and again.step == 0
        assert _questions(home, tid)[first.approval_id].status == "approved"
        assert step_statuses(home, tid) == {0: "started"}
        _not_completed(home, tid)
    assert lines_of(log) == ["announce", "announce"]


@pytest.mark.both_backends
def test_a_skip_is_spent_on_its_own_step_never_the_next(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home = _pipeline(
        tmp_path,
        [
            ("shell.run", shell_append(log, "one", "sleep 30")),
            ("shell.run", shell_append(log, "two", "sleep 30")),
            ("shell.run", shell_append(log, "three")),
        ],
    )
    with kernel(home) as k:
        tid = submit(k, "ann")
        wait_for(lambda: lines_of(log) == ["one"], what="step 1 to start")
        k.kill()  # before the answer: step 1 is in doubt

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (first,) = _pending(home, tid)
        assert first.action_type == "write_in_doubt" and first.step == 0
        k.request("answer", approval_id=first.approval_id, decision="skip")
        wait_for(lambda: lines_of(log) == ["one", "two"], what="step 2 to start")
        k.kill()  # during step 2, the run that follows the skip

    with kernel(home):
        again = _asked_again_or_ran(home, tid, log, runs=2)
        assert again.approval_id != first.approval_id
        assert again.action_type == "write_in_doubt" and again.step == 1
        assert step_statuses(home, tid) == {0: "skipped", 1: "started"}
        _not_completed(home, tid)
    assert lines_of(log) == ["one", "two"]


@pytest.mark.both_backends
def test_an_approval_is_spent_by_the_run_it_starts_even_for_a_keyed_write(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    """The far side honours the key, so a second run would have no second effect; it is
    a second run all the same, and the owner approved one."""
    quiet(http_server)
    url = http_server.url
    extra = f"""
        [approval]
        require = ["http.request"]
        [idempotency]
        trusted_key_hosts = ["{url.split("//")[1]}"]
    """
    post = {"method": "POST", "url": f"{url}/publish", "body": "x"}
    home = _pipeline(tmp_path, [("http.request", post)], extra)
    with kernel(home) as k:
        tid = submit(k, "ann")
        wait_state(home, tid, "AwaitingApproval")
        k.kill()  # before the answer

    http_server.hold()  # the far side has the request and waits; the kernel dies meanwhile
    with kernel(home) as k:
        (first,) = _pending(home, tid)
        k.request("answer", approval_id=first.approval_id, decision="approve")
        wait_for(http_server.writes, what="the approved POST to reach the far side")
        k.kill()  # during the run the approval started
    key = f"{tid}:0"
    http_server.release()
    wait_for(lambda: http_server.effects.get(key) == 1, what="the far side to apply the POST")

    # what recovery says before it acts, and in its report: the truth, a new question
    said = (
        "the write in flight (http.request, step 1 of 1) is sent again under the same "
        "idempotency key; if it needs the owner's approval, the owner is asked again first"
    )
    dry = pfar(home, "recover", "--dry-run", "--json")
    (decision,) = json.loads(dry.stdout)["decisions"]
    assert (decision["action"], decision["reason"]) == ("RetryFromScratch", said), decision
    with kernel(home) as k:
        boot = k.request("ping")["boot_id"]
        (report,) = wait_for(
            lambda: [m["body"] for m in owner_messages(home) if m["key"] == f"report:{boot}"],
            what="the recovery report",
        )
        assert " - 1 task resumed at a write the crash cut off: it is checked, or sent again " in (
            report
        ), report
        assert "one that needs your approval asks you again first (Announce" in report, report
        wait_for(
            lambda: _pending(home, tid) or len(http_server.writes()) > 1,
            what="a new question (or the POST to be sent again without one)",
        )
        assert len(http_server.writes()) == 1, "sent again on the spent approval"
        (again,) = _pending(home, tid)
        assert again.approval_id != first.approval_id
        assert again.step == 0 and again.tool == "http.request"
        _not_completed(home, tid)
        # approved anew, it runs once more, with the same key: still one effect
        k.request("answer", approval_id=again.approval_id, decision="approve")
        wait_state(home, tid, "Completed")
    assert [w["key"] for w in http_server.writes()] == [key, key]
    assert http_server.effects == {key: 1}


# -- traced workflows -------------------------------------------------------------------

WORKFLOW = """
    name = "release"

    [[steps]]
    name = "prepare"
    run = ["sh", "-c", "echo prepare >> ran.log; $PREPARE"]

    [[steps]]
    name = "build"
    run = ["sh", "-c", "echo build >> ran.log; $BUILD"]

    [[steps]]
    name = "ship"
    run = ["sh", "-c", "echo ship >> ran.log"]
"""


def _workflow(tmp_path: Path, prepare: str, build: str = "sleep 30") -> tuple[Home, Path, Path]:
    home = make_home(tmp_path / "home", script="")
    definition = tmp_path / "release.toml"
    text = textwrap.dedent(WORKFLOW).replace("$PREPARE", prepare).replace("$BUILD", build)
    definition.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    return home, definition, work


def _start(k: Any, definition: Path, work: Path) -> str:
    return str(
        k.request("workflow_start", definition=str(definition), directory=str(work))["task_id"]
    )


def _trace_step(work: Path, number: int) -> str:
    """The text of `## Step N` in the trace, up to the next section."""
    text = (work / "trace.md").read_text()
    return text.split(f"## Step {number}:", 1)[1].split("\n## ", 1)[0]


def _workflow_not_completed(home: Home, task_id: str, work: Path) -> None:
    _not_completed(home, task_id)
    head = (work / "trace.md").read_text().split("## Step 1:", 1)[0]
    assert "**Status:** in-progress" in head


@pytest.mark.both_backends
def test_a_workflow_rerun_is_spent_by_the_run_it_starts(tmp_path: Path) -> None:
    home, definition, work = _workflow(tmp_path, "echo Prepared")
    log = work / "ran.log"
    with kernel(home) as k:
        tid = _start(k, definition, work)
        wait_for(lambda: lines_of(log) == ["prepare", "build"], what="step 2 to start")
        k.kill()  # before the answer: step 2 was cut off

    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (first,) = _pending(home, tid)
        assert first.action_type == "workflow_mid_step"
        k.request("answer", approval_id=first.approval_id, decision="rerun")
        wait_for(lambda: lines_of(log).count("build") == 2, what="the rerun to start")
        k.kill()  # during the run the rerun started

    with kernel(home):
        again = _asked_again_or_ran(home, tid, log, runs=3)
        assert again.approval_id != first.approval_id
        assert again.action_type == "workflow_mid_step"
        assert "Step 2 (build) was interrupted" in again.description
        assert again.options == ["continue", "rerun", "investigate"]
        assert _questions(home, tid)[first.approval_id].status == "approved"
        assert "**Status:** in-progress" in _trace_step(work, 2)
        _workflow_not_completed(home, tid, work)
    assert lines_of(log) == ["prepare", "build", "build"]


@pytest.mark.both_backends
def test_a_workflow_skip_is_spent_on_its_own_step_never_the_next(tmp_path: Path) -> None:
    # step 1 is cut off by the first kill; re-run, it fails; the owner skips it
    home, definition, work = _workflow(tmp_path, "sleep 30; exit 3")
    log = work / "ran.log"
    with kernel(home) as k:
        tid = _start(k, definition, work)
        wait_for(lambda: lines_of(log) == ["prepare"], what="step 1 to start")
        k.kill()  # before the answers

    definition.write_text(definition.read_text().replace("sleep 30; exit 3", "exit 3"))
    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (cut_off,) = _pending(home, tid)
        assert cut_off.action_type == "workflow_mid_step"
        k.request("answer", approval_id=cut_off.approval_id, decision="rerun")
        failed = wait_for(
            lambda: [q for q in _pending(home, tid) if q.action_type == "workflow_failed"],
            what="the question about the failed step 1",
        )[0]
        assert lines_of(log) == ["prepare", "prepare"]
        k.request("answer", approval_id=failed.approval_id, decision="skip")
        wait_for(lambda: "build" in lines_of(log), what="step 2 to start")
        k.kill()  # during step 2, the run that follows the skip

    with kernel(home):
        wait_for(
            lambda: (
                _pending(home, tid)
                or "ship" in lines_of(log)
                or task_record(home, tid).state == "Completed"
            ),
            what="a new question (or the workflow to go on without one)",
        )
        assert lines_of(log) == ["prepare", "prepare", "build"]
        (again,) = _pending(home, tid)
        assert again.approval_id not in (cut_off.approval_id, failed.approval_id)
        assert again.action_type == "workflow_mid_step"
        assert "Step 2 (build) was interrupted" in again.description
        assert "skipped by the owner" in _trace_step(work, 1)
        step2 = _trace_step(work, 2)
        assert "**Status:** in-progress" in step2 and "skipped" not in step2
        _workflow_not_completed(home, tid, work)
    assert lines_of(log) == ["prepare", "prepare", "build"]


@pytest.mark.both_backends
def test_a_workflow_answer_cut_off_before_its_run_is_carried_out_once(tmp_path: Path) -> None:
    """The other side of the rule: an answer whose run never started is not lost. Killed
    right after the owner's skip is durable, the next start skips step 1 and goes on."""
    home, definition, work = _workflow(tmp_path, "exit 3", build="echo Built")
    log = work / "ran.log"
    with kernel(home) as k:
        tid = _start(k, definition, work)
        wait_state(home, tid, "AwaitingApproval")
        k.kill()  # before the answer

    with kernel(home, fault="approval_decided") as k:
        (failed,) = _pending(home, tid)
        assert failed.action_type == "workflow_failed"
        with contextlib.suppress(Exception):  # the kernel dies under the call
            k.request("answer", approval_id=failed.approval_id, decision="skip")
        assert k.killed_by_fault(), k.output()
    assert lines_of(log) == ["prepare"]

    with kernel(home):
        wait_state(home, tid, "Completed")
    assert lines_of(log) == ["prepare", "build", "ship"]
    assert list(_questions(home, tid)) == [failed.approval_id]
    assert "skipped by the owner" in _trace_step(work, 1)
    assert "skipped" not in _trace_step(work, 2)
