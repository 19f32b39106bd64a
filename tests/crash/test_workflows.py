"""Traced workflows (seed 003) through the real kernel and CLI: the seed's examples as
fixtures, a kernel killed with SIGKILL mid-step, an artifact deleted behind the trace's
back, a hand-edited trace, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pfar.journal import ApprovalRecord, ApprovalStatus
from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    make_home,
    owner_messages,
    read_journal,
    running_kernel,
    wait_for,
)

pytestmark = pytest.mark.crash

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"

DEFINITION = """
    name = "auth_feature"
    task_spec = "tasks/auth_feature/tracking.md"

    [[steps]]
    name = "orient"
    run = ["sh", "-c", "echo oriented >> ran.log; echo Read the spec"]

    [[steps]]
    name = "design"
    run = ["sh", "-c", "echo designed >> ran.log; echo Designed it"]

    [[steps]]
    name = "implement"
    run = ["sh", "-c", "echo implement >> ran.log; sleep $SLEEP; echo Implemented"]

    [[steps]]
    name = "validate"
    run = ["sh", "-c", "echo validated >> ran.log; echo 12 of 12 tests pass"]
"""


def _pfar(home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(home.root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "1000", "PATH": "/usr/bin:/bin"},
    )


def _setup(tmp_path: Path, sleep: float = 0) -> tuple:
    home = make_home(tmp_path / "home", script="")
    definition = tmp_path / "auth_feature.toml"
    definition.write_text(textwrap.dedent(DEFINITION).replace("$SLEEP", str(sleep)))
    work = tmp_path / "work"
    (work / "tasks" / "auth_feature").mkdir(parents=True)
    (work / "tasks" / "auth_feature" / "tracking.md").write_text("# tracking\n")
    return home, definition, work


def _ran(work: Path) -> list[str]:
    log = work / "ran.log"
    return log.read_text().split() if log.exists() else []


def _question(home: Home, task_id: str) -> ApprovalRecord:
    def pending() -> list[ApprovalRecord]:
        asked = read_journal(home, lambda s: s.questions.approvals_for_task(task_id))
        return [a for a in asked if a.status is ApprovalStatus.pending]

    return wait_for(pending, what="a question to the owner")[0]


def _step_process(home: Home, task_id: str, step: int) -> bool:
    running = read_journal(home, lambda s: s.tasks.started_processes(task_id))
    return any(n == step for _, n, _ in running)


def _state(home: Home, task_id: str) -> str:
    return read_journal(home, lambda s: s.tasks.get(task_id)).state.value


@pytest.mark.parametrize(
    ("fixture", "state", "phrase"),
    [
        ("between_steps.md", "between_steps", "Resuming from Step 3: implement"),
        ("mid_step.md", "mid_step", "Step 3 (implement) was interrupted"),
        ("failed.md", "failed", "Step 4 (validate) failed"),
        ("completed.md", "completed", "completed"),
        ("hand_edited.md", None, ""),
    ],
)
def test_seed_examples_through_pfar_workflow_status(
    tmp_path: Path, fixture: str, state: str | None, phrase: str
) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(FIXTURES / fixture, work / "trace.md")
    before = (work / "trace.md").read_bytes()
    r = _pfar(home, "workflow", "status", str(work), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    if state is not None:
        assert data["state"] == state
        assert phrase in data["message"]
    assert (work / "trace.md").read_bytes() == before  # status only reads


def test_seed_example_mid_step_resumed_by_the_kernel_asks_then_reruns(tmp_path: Path) -> None:
    home, definition, work = _setup(tmp_path)
    shutil.copy(FIXTURES / "mid_step.md", work / "trace.md")
    for artifact in ("src/auth/login.py", "src/api/routes.py"):
        (work / artifact).parent.mkdir(parents=True, exist_ok=True)
        (work / artifact).write_text("x\n")
    with running_kernel(home):
        started = _pfar(home, "workflow", "start", str(definition), str(work))
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.split()[2]
        q = _question(home, task_id)
        assert q.action_type == "workflow_mid_step"
        assert q.options == ["continue", "rerun", "investigate"]
        assert "Current focus: Token validation logic." in q.description
        assert "Artifacts verified: src/auth/login.py, src/api/routes.py" in q.description
        assert _ran(work) == []  # never silently re-run
        answered = _pfar(home, "answer", q.approval_id[:8], "rerun")
        assert answered.returncode == 0, answered.stderr
        wait_for(lambda: _state(home, task_id) == "Completed", what="the workflow to finish")
    assert _ran(work) == ["implement", "validated"]  # steps 1-2 were not re-run
    text = (work / "trace.md").read_text()
    assert "## Resume" in text and "**Resuming from:** Step 3 — implement" in text
    assert "**Status:** completed" in text.split("# Trace")[1].split("---")[0]


def test_seed_example_failed_asks_and_never_auto_retries(tmp_path: Path) -> None:
    home, definition, work = _setup(tmp_path)
    shutil.copy(FIXTURES / "failed.md", work / "trace.md")
    with running_kernel(home) as k:
        task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
            "task_id"
        ]
        q = _question(home, task_id)
        assert q.action_type == "workflow_failed"
        assert q.options == ["retry", "skip", "back", "abort"]
        assert "Challenges: Auth endpoint returns 401 for valid tokens." in q.description
        assert _ran(work) == []
        k.request("answer", approval_id=q.approval_id, decision="abort")
        wait_for(lambda: _state(home, task_id) == "Failed", what="the abort")
        assert _ran(work) == []
        # later the owner comes back to it: the recovery check runs again, asks again
        resumed = _pfar(home, "workflow", "resume", str(work))
        assert resumed.returncode == 0, resumed.stderr
        again = resumed.stdout.split()[2]
        assert again != task_id
        q2 = _question(home, again)
        assert q2.action_type == "workflow_failed"
        assert _pfar(home, "answer", q2.approval_id, "retry").returncode == 0
        wait_for(lambda: _state(home, again) == "Completed", what="the retried workflow")
    assert _ran(work) == ["validated"]


def test_seed_example_between_steps_resumes_at_the_next_step(tmp_path: Path) -> None:
    home, definition, work = _setup(tmp_path)
    shutil.copy(FIXTURES / "between_steps.md", work / "trace.md")
    (work / "docs").mkdir()
    (work / "docs" / "auth_api.md").write_text("# API\n")  # step 2's artifact
    with running_kernel(home) as k:
        task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
            "task_id"
        ]
        wait_for(lambda: _state(home, task_id) == "Completed", what="the workflow to finish")
    assert _ran(work) == ["implement", "validated"]
    told = [m["body"] for m in owner_messages(home)]
    assert any("Resuming from Step 3: implement" in b for b in told)


def test_kernel_killed_mid_step_asks_on_restart_and_the_step_runs_once_more(
    tmp_path: Path,
) -> None:
    home, definition, work = _setup(tmp_path, sleep=30)
    k = KernelProcess(home)
    k.wait_ready()
    task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
        "task_id"
    ]
    wait_for(lambda: "implement" in _ran(work), what="step 3 to start")
    # the step's process is journaled just after it starts: kill once it is, so that the
    # restart has it to end (a kill before that leaves no process on record to report)
    wait_for(lambda: _step_process(home, task_id, 2), what="step 3's process on record")
    k.kill()
    assert "## Step 3: implement\n**Status:** in-progress" in (work / "trace.md").read_text()

    with running_kernel(home) as k2:
        q = _question(home, task_id)
        assert q.action_type == "workflow_mid_step"
        report = [m["body"] for m in owner_messages(home) if m["kind"] == "report"][-1]
        assert " - 1 orphaned process cleaned up" in report  # the `sleep 30` was ended
        # make the step quick this time, then let the owner choose to re-run it
        definition.write_text(definition.read_text().replace("sleep 30", "sleep 0"))
        k2.request("answer", approval_id=q.approval_id, decision="rerun")
        wait_for(lambda: _state(home, task_id) == "Completed", what="the workflow to finish")
    assert _ran(work) == ["oriented", "designed", "implement", "implement", "validated"]


def test_artifact_deleted_behind_the_traces_back_is_flagged(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(FIXTURES / "mid_step.md", work / "trace.md")
    (work / "src" / "auth").mkdir(parents=True)
    (work / "src" / "auth" / "login.py").write_text("x\n")  # routes.py is gone
    r = _pfar(home, "workflow", "status", str(work), "--json")
    data = json.loads(r.stdout)
    missing = [a["path"] for a in data["artifacts"] if not a["exists"]]
    assert missing == ["src/api/routes.py"]
    human = _pfar(home, "workflow", "status", str(work))
    assert "artifact src/api/routes.py: MISSING" in human.stdout


def test_a_missing_artifact_turns_the_automatic_resume_into_a_question(tmp_path: Path) -> None:
    home, definition, work = _setup(tmp_path)
    shutil.copy(FIXTURES / "between_steps.md", work / "trace.md")  # docs/auth_api.md is gone
    with running_kernel(home) as k:
        task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
            "task_id"
        ]
        q = _question(home, task_id)
        assert "docs/auth_api.md" in q.description
        assert _ran(work) == []
        k.request("answer", approval_id=q.approval_id, decision="continue")
        wait_for(lambda: _state(home, task_id) == "Completed", what="the workflow to finish")
    assert _ran(work) == ["implement", "validated"]


def test_a_trace_not_in_the_format_is_named_and_never_rewritten(tmp_path: Path) -> None:
    home, definition, work = _setup(tmp_path)
    bad = (
        (FIXTURES / "mid_step.md")
        .read_text()
        .replace(
            "**Status:** in-progress\n**Summary:** Implementing",
            "**Status:** halfway\n**Summary:** Implementing",
        )
    )
    (work / "trace.md").write_text(bad)
    r = _pfar(home, "workflow", "status", str(work))
    assert r.returncode == 1
    assert "trace.md:" in r.stderr and "halfway" in r.stderr
    with running_kernel(home) as k:
        task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
            "task_id"
        ]
        wait_for(lambda: _state(home, task_id) == "Failed", what="the workflow to stop")
    assert (work / "trace.md").read_text() == bad
    assert _ran(work) == []


def test_a_workflow_directory_that_does_not_exist(tmp_path: Path) -> None:
    home, definition, _ = _setup(tmp_path)
    for args in (
        ("workflow", "status", str(tmp_path / "nope")),
        ("workflow", "start", str(definition), str(tmp_path / "nope")),
    ):
        r = _pfar(home, *args)
        assert r.returncode == 1
        assert "does not exist" in r.stderr


def test_pfar_task_trace_renders_any_task_journal_as_a_trace(tmp_path: Path) -> None:
    from pfar.runners.workflow import classify, parse_trace

    home = make_home(
        tmp_path / "home",
        templates={
            "note": """
                id = "note"
                description = "Save a note"
                allowed_tools = ["file.write", "file.read"]
            """
        },
        script="""
            [[responses]]
            template = "note"
            phase = "plan"
            [[responses.json.steps]]
            tool = "file.write"
            description = "save the note"
            args = { path = "note.md", content = "$input" }
            [[responses.json.steps]]
            tool = "file.read"
            description = "read it back"
            args = { path = "note.md" }
        """,
    )
    with running_kernel(home) as k:
        task_id = k.request("submit", template="note", text="buy milk")["task_id"]
        wait_for(lambda: _state(home, task_id) == "Completed", what="the task")
    r = _pfar(home, "task", "trace", task_id[:8])
    assert r.returncode == 0, r.stderr
    trace = parse_trace(r.stdout, "pfar task trace")
    assert [(s.name, s.status.value) for s in trace.steps] == [
        ("save the note", "completed"),
        ("read it back", "completed"),
    ]
    assert [a.path for a in trace.steps[0].artifacts] == ["note.md"]
    assert classify(trace).value == "completed"
