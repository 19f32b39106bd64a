"""A question to the owner of a kind this pfar does not know (one a newer pfar asked)
stops nothing: the kernel starts, lists it, and the owner's answer moves its task as
the answer to a question with no kind of its own. Its row is never rewritten. Through
a real kernel process and its CLI."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pfar.vault.home import Home

from ..support import db, make_home, pfar, running_kernel, task_states, wait_for

TEMPLATE = """
id = "w"
description = "Write it"
allowed_tools = ["file.write"]
[approval]
require = ["file.write"]
"""
SCRIPT = """
[[responses]]
template = "w"
phase = "plan"
[[responses.json.steps]]
tool = "file.write"
description = "write it"
args = { path = "out.txt", content = "hello" }
"""


def kinds(home: Home) -> list[tuple[str, str, str]]:
    with contextlib.closing(db(home)) as conn:
        rows = conn.execute("SELECT approval_id, action_type, status FROM pending_approvals")
        return [tuple(r) for r in rows]


def test_a_question_of_an_unknown_kind_is_listed_and_answered(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"w": TEMPLATE}, script=SCRIPT)
    with running_kernel(home) as k:
        task_id = str(k.request("submit", template="w", text="go")["task_id"])
        ((approval_id, kind, _),) = wait_for(lambda: kinds(home), what="the write's approval")
        assert kind == "write"
    with contextlib.closing(db(home)) as conn:  # as a newer pfar (or a hand) might have
        conn.execute("UPDATE pending_approvals SET action_type = 'teleport'")

    with running_kernel(home):
        listed = pfar(home, "approvals")
        assert listed.returncode == 0 and "teleport" in listed.stdout, listed.stdout
        shown = pfar(home, "approval", "show", approval_id[:8])
        assert "action_type: teleport" in shown.stdout, shown.stdout + shown.stderr
        answer = pfar(home, "approve", approval_id[:8])
        assert answer.returncode == 0, answer.stdout + answer.stderr
        wait_for(lambda: task_states(home).get(task_id) == "Completed", what="the approved write")
    assert kinds(home) == [(approval_id, "teleport", "approved")]  # the row's kind as it was
