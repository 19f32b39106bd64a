"""The command line's small edges, through the real CLI and a real kernel: empty input
is refused alike for every kind of task, an answer says what it did to the task, a
finished workflow says so truthfully, `--json` stays JSON, `--wait` shows the question
it stopped on, and a mistyped config key gets a suggestion."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pfar import Operator, open_kernel
from pfar.adapters.cli import read_commands
from pfar.vault.driver import sqlite
from pfar.vault.home import Home

from ..support import db, make_home, pfar, running_kernel, said, task_states, wait_for

TERMINAL_STATES = {"Completed", "Failed", "Abandoned", "Cancelled"}


def _pending_approval(home: Home, task_id: str | None = None) -> sqlite.Row:
    def find() -> sqlite.Row | None:
        with db(home) as conn:
            rows = conn.execute(
                "SELECT approval_id, options_json, task_id FROM pending_approvals "
                "WHERE status = 'pending'"
            ).fetchall()
        rows = [r for r in rows if task_id is None or r["task_id"] == task_id]
        return rows[0] if rows else None

    return wait_for(find, what="a pending approval")  # type: ignore[no-any-return]


def test_an_empty_text_is_refused_like_an_empty_prompt(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    work = tmp_path / "work"
    work.mkdir()
    with running_kernel(home):
        for args in (("submit", "note", ""), ("submit", "note", "   "), ("loop", "", "--dir")):
            argv = [*args, str(work)] if args[-1] == "--dir" else list(args)
            r = pfar(home, *argv)
            assert r.returncode == 1, said(r)
            assert "is empty" in said(r), said(r)
    assert task_states(home) == {}


def test_the_state_filter_takes_any_case(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with running_kernel(home):
        sub = pfar(home, "submit", "note", "buy milk", "--json")
        assert sub.returncode == 0, said(sub)
        task_id = json.loads(sub.stdout)["task_id"]
        wait_for(lambda: task_states(home).get(task_id) == "Completed", what="the note")
        for spelled in ("completed", "COMPLETED", "Completed"):
            r = pfar(home, "tasks", "--state", spelled, "--json")
            assert r.returncode == 0, said(r)
            assert [t["task_id"] for t in json.loads(r.stdout)] == [task_id]


def test_deny_says_the_task_fails_when_it_does(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)  # run_command: a denial fails it
    effects = tmp_path / "effects.log"
    with running_kernel(home):
        sub = pfar(home, "submit", "run_command", f"echo ran >> {effects}", "--json")
        assert sub.returncode == 0, said(sub)
        task_id = json.loads(sub.stdout)["task_id"]
        approval_id = _pending_approval(home)["approval_id"]
        r = pfar(home, "deny", approval_id[:8])
        assert r.returncode == 0, said(r)
        assert "resumes" not in said(r), said(r)
        assert f"approval {approval_id}: denied; task {task_id} failed: denied by the owner" in (
            said(r)
        )
    assert task_states(home) == {task_id: "Failed"}
    assert not effects.exists()


WORKFLOW = """\
name = "wf"
[[steps]]
name = "one"
run = ["sh", "-c", "exit 3"]
[[steps]]
name = "two"
run = ["touch", "two.txt"]
"""


def test_a_skipped_workflow_step_and_the_finished_workflow_are_told_plainly(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    definition = tmp_path / "wf.toml"
    definition.write_text(WORKFLOW)
    with running_kernel(home):
        r = pfar(home, "workflow", "start", str(definition), str(work))
        assert r.returncode == 0, said(r)
        task_id = r.stdout.split()[2]
        asked = _pending_approval(home, task_id)
        assert "skip" in json.loads(asked["options_json"])
        answered = pfar(home, "answer", asked["approval_id"][:8], "skip")
        assert answered.returncode == 0, said(answered)
        assert "denied" not in said(answered), said(answered)
        assert f"approval {asked['approval_id']}: answered skip; task {task_id} " in said(answered)
        wait_for(lambda: task_states(home).get(task_id) in TERMINAL_STATES, what="the workflow")
        assert task_states(home)[task_id] == "Completed"
        assert (work / "two.txt").exists()

        listed = pfar(home, "tasks", "--json")
        row = next(t for t in json.loads(listed.stdout) if t["task_id"] == task_id)
        assert row["current_step"] == "2/2"  # past its last step, not 0/2

        status = pfar(home, "workflow", "status", str(work))
        assert status.returncode == 0, said(status)
        assert "prior session" not in said(status), said(status)
        assert "completed" in said(status), said(status)


def test_events_json_prints_json_lines_only(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with running_kernel(home):
        for args in ((), ("--after", "1000")):
            r = pfar(home, "events", "--json", *args)
            assert r.returncode == 0, said(r)
            for line in r.stdout.splitlines():
                json.loads(line)  # every line on stdout is JSON (here: none)
            assert "events" in r.stderr  # the note is for the person, on stderr
        sub = pfar(home, "submit", "note", "buy milk", "--wait")
        assert sub.returncode == 0, said(sub)
        r = pfar(home, "events", "--json")
        assert r.stdout.strip(), said(r)
        kinds = [json.loads(line)["kind"] for line in r.stdout.splitlines()]
        assert "TaskCompleted" in kinds


ASKING_SCRIPT = """
[[turns]]
turn = 1
text = "Listing."
tool_calls = [ { name = "shell.run", input = { argv = ["sh", "-c", "echo listed"] } } ]

[[turns]]
text = "Done."
"""


def test_loop_wait_that_stops_on_a_question_shows_it_and_how_to_answer(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = '[loop]\ntools = ["shell.run"]\n'  # not always allowed: the owner is asked
    home = make_home(tmp_path / "home", script=ASKING_SCRIPT, config=config)
    with running_kernel(home):
        r = pfar(home, "loop", "list it", "--dir", str(work), "--wait")
        assert r.returncode == 0, said(r)
        assert "AwaitingApproval" in said(r), said(r)
        approval_id = _pending_approval(home)["approval_id"]
        assert f"it asks (approval {approval_id}): " in said(r), said(r)
        assert "shell.run" in said(r), said(r)
        assert f"pfar approve {approval_id}" in said(r), said(r)
        assert f"pfar deny {approval_id}" in said(r), said(r)


def test_an_unknown_config_key_gets_the_nearest_known_one(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        config="[recovery]\nshutdown_timeout_secs = 5\n[loop]\ntools = []\nalways_alow = []\n",
    )
    r = subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(home.root), "run", "--no-stdin"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode != 0
    out = " ".join((r.stdout + r.stderr).split())
    assert (
        "recovery.shutdown_timeout_secs: unknown key (did you mean `shutdown_timeout_seconds`?)"
        in out
    ), out
    assert "loop.always_alow: unknown key (did you mean `always_allow`?)" in out, out


def test_a_chat_or_stdin_answer_says_the_decision_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    definition = tmp_path / "wf.toml"
    definition.write_text(WORKFLOW)

    async def main() -> None:
        async with open_kernel(home) as kernel:
            operator = Operator(kernel)
            started = await operator.start_workflow(str(definition), str(work))
            await operator.wait_idle()
            (asked,) = (await operator.questions()).approvals
            assert asked.task_id == started.task_id
            stream = asyncio.StreamReader()
            stream.feed_data(f"answer {asked.approval_id[:8]} skip\n".encode())
            stream.feed_eof()
            await read_commands(operator, stream)
            await operator.wait_idle()

    asyncio.run(main())
    printed = capsys.readouterr().out
    assert "answered skip" in printed, printed
    assert "denied" not in printed, printed
