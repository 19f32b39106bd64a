"""`[approval] tainted_writes`: a write planned after a step that read untrusted (Raw)
data waits for the owner, whose question carries the taint; a write before any such
read runs on its own. Through a real kernel process, its CLI and a loopback server."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from pfar.vault.home import Home

from ..support import RecordingServer, db, make_home, pfar, running_kernel, task_states, wait_for

TEMPLATE = """
id = "{tid}"
description = "{title}"
allowed_tools = ["http.request", "file.write"]
[approval]
tainted_writes = true
"""


def plan(tid: str, steps: list[tuple[str, dict[str, str]]]) -> str:
    out = f'[[responses]]\ntemplate = "{tid}"\nphase = "plan"\n'
    for i, (tool, args) in enumerate(steps):
        table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in args.items())
        out += (
            f'[[responses.json.steps]]\ntool = "{tool}"\ndescription = "step {i + 1}"\n'
            f"args = {{ {table} }}\n"
        )
    return out


def approvals(home: Home, task_id: str) -> list[tuple[str, str | None, str, str]]:
    with contextlib.closing(db(home)) as conn:
        return conn.execute(
            "SELECT approval_id, taint_level, action_type, description FROM pending_approvals "
            "WHERE task_id = ?",
            (task_id,),
        ).fetchall()


def steps(home: Home, task_id: str) -> dict[int, str]:
    with contextlib.closing(db(home)) as conn:
        return dict(
            conn.execute("SELECT step, status FROM task_steps WHERE task_id = ?", (task_id,))
        )


def test_a_write_after_a_raw_read_waits_for_the_owner_and_one_before_it_does_not(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    read = ("http.request", {"url": f"{http_server.url}/page"})
    write = ("file.write", {"path": "out.txt", "content": "hello"})
    home = make_home(
        tmp_path / "home",
        templates={
            "after": TEMPLATE.format(tid="after", title="Read then write"),
            "before": TEMPLATE.format(tid="before", title="Write then read"),
        },
        script="\n".join([plan("after", [read, write]), plan("before", [write, read])]),
    )
    with running_kernel(home) as k:
        tainted = str(k.request("submit", template="after", text="go")["task_id"])
        clean = str(k.request("submit", template="before", text="go")["task_id"])
        wait_for(lambda: task_states(home).get(clean) == "Completed", what="the clean task")
        assert approvals(home, clean) == []
        assert steps(home, clean) == {0: "completed", 1: "completed"}

        ((approval_id, taint, action, description),) = wait_for(
            lambda: approvals(home, tainted), what="the tainted write's approval"
        )
        assert (taint, action) == ("Raw", "tainted_write")
        assert "wants to run file.write (step 2 of 2)" in description, description
        assert task_states(home)[tainted] == "AwaitingApproval"
        assert steps(home, tainted) == {0: "completed"}  # the write did not run

        answer = pfar(home, "approve", approval_id[:8])
        assert answer.returncode == 0, answer.stdout + answer.stderr
        wait_for(lambda: task_states(home).get(tainted) == "Completed", what="the approved write")
    assert steps(home, tainted) == {0: "completed", 1: "completed"}
    assert [r["path"] for r in http_server.requests] == ["/page", "/page"]
