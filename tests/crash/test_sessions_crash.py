"""Sessions across a killed kernel (seed 004): the agent a session ran is found by its
recorded pid and start time and ended, the session is PAUSED with recovered_at, and the
owner's report says so. The kernel and the CLI run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import PfarError
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


def _project_and_home(tmp_path: Path, agent_script: str) -> tuple[Path, Home]:
    """A project directory, and a home whose sessions run `sh -c agent_script`."""
    project = tmp_path / "project"
    project.mkdir()
    config = (
        f'[sessions]\nagent_command = ["sh", "-c", {json.dumps(agent_script)}]\nresume_args = []\n'
    )
    return project, make_home(tmp_path / "home", script="", config=config)


def test_agent_left_running_by_a_killed_kernel_is_ended_and_its_session_paused(
    tmp_path: Path,
) -> None:
    project, home = _project_and_home(
        tmp_path, "echo agent for {session_id} in $PWD; exec sleep 300"
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


def _session_row(home: Home) -> dict[str, Any]:
    """The one session, as the journal holds it (no kernel involved)."""
    (s,) = read_journal(home, lambda store: store.sessions.list())
    return {"status": s.status.value, "context": s.context, "process": s.process}


# each fault point, the requests that reach it (the last one is cut off by the kill), and
# the status that write committed
SESSION_FAULTS = [
    pytest.param("session_created", ["session_new"], "CREATED", id="created"),
    pytest.param("session_activated", ["session_new", "session_resume"], "ACTIVE", id="activated"),
    pytest.param(
        "session_paused",
        ["session_new", "session_resume", "session_pause"],
        "PAUSED",
        id="paused",
    ),
    pytest.param(
        "session_terminated",
        ["session_new", "session_resume", "session_terminate"],
        "TERMINATED",
        id="terminated",
    ),
]


@pytest.mark.parametrize(("fault", "requests", "committed"), SESSION_FAULTS)
def test_a_kernel_killed_at_a_session_fault_point_restarts_with_what_that_write_committed(
    tmp_path: Path, fault: str, requests: list[str], committed: str
) -> None:
    """The session write is committed through the journal's writer, and the kernel is
    SIGKILLed right after that commit, before the request is answered: the next start
    finds exactly what the write committed (an ACTIVE session is then recovered)."""
    project, home = _project_and_home(tmp_path, "exec sleep 300")
    k = KernelProcess(home, fault=fault)
    k.wait_ready()
    session_id = ""
    answered: dict[str, Any] = {}
    *before, last = requests
    for op in before:
        if op == "session_new":
            answered = k.request(op, project_path=str(project), thread_id="chat-1")
            session_id = answered["session_id"]
        else:
            answered = k.request(op, session_id=session_id)
    with pytest.raises(PfarError, match="closed the control connection"):
        if last == "session_new":
            k.request(last, project_path=str(project), thread_id="chat-1")
        else:
            k.request(last, session_id=session_id)
    assert k.killed_by_fault(), k.output()
    assert f"SIGKILL after {fault} #1" in k.output()

    row = _session_row(home)
    assert row["status"] == committed  # durable, though its request was never answered
    agent = (answered.get("process") or {}).get("pid")
    if committed == "ACTIVE":
        agent = row["process"]["pid"]
        assert _alive(agent)  # recorded with the move, and outlived its kernel
    elif agent is not None:
        assert not _alive(agent)  # stopped before the move that left ACTIVE was written

    with running_kernel(home) as k2:
        report = wait_for(
            lambda: [m["body"] for m in owner_messages(home) if m["kind"] == "report"][-1:],
            what="the recovery report",
        )[0]
        [shown] = k2.request("sessions")
        if committed == "ACTIVE":
            assert " - Recovered 1 session after crash (paused)" in report
            assert shown["status"] == "PAUSED"
            assert shown["context"]["ended_orphan_pid"] == agent
            assert not _alive(agent)
        else:
            assert "session" not in report.lower()
            assert shown["status"] == committed
            assert "recovered_at" not in shown["context"]
        assert shown["process"] is None
        if committed != "CREATED":
            assert shown["context"]["runs"] == 1  # the resume's context came with its move
        if committed == "TERMINATED":  # the thread is free again
            again = k2.request("session_new", project_path=str(project), thread_id="chat-1")
            assert again["status"] == "CREATED"
        elif session_id:
            assert shown["session_id"] == session_id
