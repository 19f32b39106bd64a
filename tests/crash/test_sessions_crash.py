"""Sessions across a killed kernel (seed 004): the agent a session ran is found by its
recorded pid and start time and ended, the session is PAUSED with recovered_at, and the
owner's report says so. The kernel and the CLI run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..support import KernelProcess, make_home, owner_messages, running_kernel, wait_for

pytestmark = pytest.mark.crash


def _pfar(home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(home.root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "1000", "PATH": "/usr/bin:/bin"},
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_agent_left_running_by_a_killed_kernel_is_ended_and_its_session_paused(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = make_home(
        tmp_path / "home",
        script="",
        config="""
            [sessions]
            agent_command = ["sh", "-c", "echo agent for {session_id} in $PWD; exec sleep 300"]
            resume_args = []
        """,
    )
    k = KernelProcess(home)
    k.wait_ready()
    created = k.request("session_new", project_path=str(project), thread_id="chat-1")
    active = k.request("session_resume", session_id=created["session_id"][:8])
    assert active["status"] == "ACTIVE"
    pid = active["process"]["pid"]
    assert _alive(pid)
    k.kill()
    assert _alive(pid)  # the agent outlived its kernel

    with running_kernel(home):
        report = wait_for(
            lambda: [m["body"] for m in owner_messages(home) if m["kind"] == "report"][-1:],
            what="the recovery report",
        )[0]
        assert " - Recovered 1 session after crash (paused)" in report
        assert not _alive(pid)
        shown = _pfar(home, "session", "show", created["session_id"], "--json")
        assert shown.returncode == 0, shown.stderr
        session = json.loads(shown.stdout)
        assert session["status"] == "PAUSED"
        assert "recovered_at" in session["context"]
        assert session["context"]["ended_orphan_pid"] == pid

        # the owner picks it up again: a new agent, ACTIVE
        resumed = _pfar(home, "session", "resume", created["session_id"][:8])
        assert resumed.returncode == 0, resumed.stderr
        assert "ACTIVE" in resumed.stdout
        listed = json.loads(_pfar(home, "session", "list", "--json").stdout)
        assert [s["status"] for s in listed] == ["ACTIVE"]
    # a clean shutdown pauses it (its agent stopped), nothing left ACTIVE
    listed = json.loads(_pfar(home, "session", "list", "--json").stdout)
    assert [s["status"] for s in listed] == ["PAUSED"]
    assert not _alive(listed[0]["process"]["pid"]) if listed[0]["process"] else True


def test_session_commands_refuse_bad_input_with_clear_errors(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="")
    missing = _pfar(home, "session", "show", "nope")
    assert missing.returncode == 1
    assert "nope" in missing.stderr
    with running_kernel(home) as k:
        s = k.request("session_new", project_path=str(tmp_path), thread_id="t")
        no_agent = _pfar(home, "session", "resume", s["session_id"])
        assert no_agent.returncode == 1
        assert "agent_command" in no_agent.stderr
        done = _pfar(home, "session", "terminate", s["session_id"])
        assert done.returncode == 0, done.stderr
        again = _pfar(home, "session", "resume", s["session_id"])
        assert again.returncode == 1
        assert "TERMINATED" in again.stderr
