"""An approval shows the owner the whole action, or says plainly what it cut, and lets
exactly the action it showed run: through the real CLI and a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

from pfar.vault.home import Home

from ..support import KernelProcess, db, make_home, owner_messages, pfar, running_kernel, wait_for


def pending(home: Home) -> list[dict[str, object]]:
    r = pfar(home, "approvals", "--json")
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout)["approvals"])


def approval_bodies(home: Home) -> list[str]:
    return [m["body"] for m in owner_messages(home) if m["kind"] == "approval"]


def test_blanks_cannot_hide_the_tail_of_a_command(tmp_path: Path) -> None:
    marker = tmp_path / "HIDDEN_TAIL"
    home = make_home(tmp_path / "home", examples=True)
    command = "echo hello" + " " * 600 + f";touch {marker}"
    with running_kernel(home) as k:
        k.request("submit", template="run_command", text=command)
        (a,) = wait_for(lambda: pending(home), what="the approval")
        assert json.loads(str(a["data_preview"])) == {"argv": ["sh", "-c", command]}
        (body,) = wait_for(lambda: approval_bodies(home), what="the approval message")
        assert "⟨600 blanks⟩" in body and f";touch {marker}" in body, body
    assert not marker.exists()


def test_a_long_action_is_cut_in_the_message_and_shown_whole_on_demand(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    command = "echo " + "x" * 3000 + " END-OF-ACTION-MARK"
    with running_kernel(home) as k:
        k.request("submit", template="run_command", text=command)
        (a,) = wait_for(lambda: pending(home), what="the approval")
        (body,) = wait_for(lambda: approval_bodies(home), what="the approval message")
        length = len(str(a["data_preview"]))
        assert f"of {length} characters not shown here" in body, body
        assert f"pfar approval show {str(a['approval_id'])[:8]}" in body
        assert "END-OF-ACTION-MARK" in body  # the tail is shown, not only the head

        shown = pfar(home, "approval", "show", str(a["approval_id"])[:8])
        assert shown.returncode == 0, shown.stderr
        assert command in shown.stdout
        assert f"sha256 {a['args_sha256']}" in shown.stdout


def test_an_approval_lets_only_the_arguments_it_showed_run(tmp_path: Path) -> None:
    """The journal's plan is changed under a parked approval (a hostile or broken
    write): the owner's yes covers what was shown, so the changed step asks again."""
    shown_marker, swapped_marker = tmp_path / "SHOWN", tmp_path / "SWAPPED"
    home = make_home(tmp_path / "home", examples=True)
    k = KernelProcess(home)
    k.wait_ready()
    task_id = k.request("submit", template="run_command", text=f"touch {shown_marker}")["task_id"]
    (first,) = wait_for(lambda: pending(home), what="the approval")
    k.kill()  # first kill: before the answer

    with db(home) as conn:
        (plan_json,) = conn.execute(
            "SELECT plan_json FROM task_journal WHERE task_id = ?", (task_id,)
        ).fetchone()
        plan = json.loads(plan_json)
        plan["steps"][0]["args"]["argv"][2] = f"touch {swapped_marker}"
        conn.execute(
            "UPDATE task_journal SET plan_json = ? WHERE task_id = ?", (json.dumps(plan), task_id)
        )

    with running_kernel(home) as k2:
        answer = pfar(home, "approve", str(first["approval_id"])[:8])
        assert answer.returncode == 0, answer.stdout + answer.stderr
        second = wait_for(
            lambda: [a for a in pending(home) if a["approval_id"] != first["approval_id"]],
            what="a new question for the changed action",
        )[0]
        assert f"touch {swapped_marker}" in str(second["data_preview"])
        assert second["args_sha256"] != first["args_sha256"]
        k2.proc.kill()  # second kill: after the answer, with the new question parked
        k2.wait_exit()

    with running_kernel(home):
        wait_for(lambda: pending(home), what="the question, re-sent")
        states = {r["approval_id"]: r["status"] for r in pending(home)}
        assert states == {second["approval_id"]: "pending"}
    assert not swapped_marker.exists() and not shown_marker.exists()
