"""The kernel killed with SIGKILL while an MCP tool's call is in flight, for each of
the protocol's annotation classes, proved from the test server's own request log: a
read-only tool's call is made again; an idempotent one's again with the same
arguments; a plain write's is never made again blind (the owner is asked retry, skip
or fail, and the model told the truth). What the killed kernel's server left running
is ended by the next start before any task resumes."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..mcp_support import alive, children, server_command, server_toml, starts
from ..support import loop_turns, make_home, step_statuses, task_approvals, wait_for
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash

ARGS = {
    "peek": {"name": "colour"},
    "put": {"key": "colour", "value": "blue"},
    "append": {"text": "one"},
}


def _home(tmp_path: Path, tool: str) -> tuple[Home, Path, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "requests.jsonl"
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / tool).touch()  # the call waits, in flight, until the test lets it go
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Calling the server."
        tool_calls = [ {{ name = "mcp__t__{tool}", input = {json.dumps(ARGS[tool])} }} ]

        [[turns]]
        text = "What I know: $last"
        """
    ).replace('": ', '" = ')
    tools = "".join(f"[mcp.servers.tools.{t}]\nask = false\n" for t in ARGS)
    config = '[loop]\ntools = ["Read"]\n' + server_toml("t", server_command(log, hold), tools)
    return make_home(tmp_path / "home", script=script, config=config), work, log, hold


def _killed_under_the_call(tmp_path: Path, tool: str) -> tuple[Home, str, Path, Path, Any]:
    home, work, log, hold = _home(tmp_path, tool)
    with kernel(home) as k:
        tid = str(k.request("loop", prompt="use it", directory=str(work))["task_id"])
        wait_for(lambda: starts(log, tool), what=f"the {tool} call to start")
        k.kill()
    (first,) = starts(log, tool)
    (helper,) = children(log)
    assert alive(helper)  # what the killed kernel's server left running
    return home, tid, log, hold, first


@pytest.mark.parametrize("tool", ["peek", "put"])
def test_a_read_or_idempotent_call_cut_off_is_made_again_with_its_arguments(
    tmp_path: Path, tool: str
) -> None:
    home, tid, log, hold, first = _killed_under_the_call(tmp_path, tool)
    with kernel(home) as k:
        wait_for(lambda: not alive(children(log)[0]), what="the orphan to be ended")
        wait_for(lambda: len(starts(log, tool)) == 2, what="the call to be made again")
        (hold / tool).unlink()
        wait_state(home, tid, "WaitingForUser")
        assert k.terminate() == 0  # a kernel that stops ends its servers and their helpers
    assert not any(alive(pid) for pid in children(log))
    calls = starts(log, tool)
    assert [c["args"] for c in calls] == [ARGS[tool], ARGS[tool]]
    assert calls[1]["pid"] != first["pid"]
    turns = loop_turns(home, tid)
    (result,) = turns[2]["results"]
    assert not result["is_error"]


@pytest.mark.parametrize("answer", ["retry", "skip"])
def test_a_plain_write_cut_off_is_asked_about_and_the_model_told_the_truth(
    tmp_path: Path, answer: str
) -> None:
    home, tid, log, hold, _ = _killed_under_the_call(tmp_path, "append")
    (hold / "append").unlink()  # a retry, if the owner allows one, runs to its end
    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        assert not alive(children(log)[0])  # ended before the task resumed
        audit = [json.loads(line) for line in home.audit_log.read_text().splitlines()]
        assert any(a.get("event") == "mcp_servers_ended" for a in audit), audit[-5:]
        (question,) = [q for q in task_approvals(home, tid) if q.status == "pending"]
        assert question.action_type == "write_in_doubt"
        assert "mcp__t__append" in question.description
        assert len(starts(log, "append")) == 1  # not made again blind
        k.request("answer", approval_id=question.approval_id, decision=answer)
        wait_state(home, tid, "WaitingForUser")
        assert k.terminate() == 0
    assert not any(alive(pid) for pid in children(log))
    calls = starts(log, "append")
    turns = loop_turns(home, tid)
    (result,) = turns[2]["results"]
    if answer == "retry":
        assert [c["args"] for c in calls] == [ARGS["append"], ARGS["append"]]
        assert step_statuses(home, tid) == {0: "completed"}
        assert not result["is_error"] and "appended one" in result["content"]
    else:
        assert len(calls) == 1
        assert step_statuses(home, tid) == {0: "skipped"}
        assert result["is_error"] and "may or may not have had its effect" in result["content"]
        assert "may or may not have had its effect" in turns[3]["text"]


def test_a_write_cut_off_whose_server_is_gone_after_the_restart_is_asked_about(
    tmp_path: Path,
) -> None:
    home, tid, log, hold, _ = _killed_under_the_call(tmp_path, "append")
    # the owner changed the server's command meanwhile, and it no longer starts
    text = home.config.read_text()
    home.config.write_text(text.replace(json.dumps(sys.executable), '"/nonexistent/python"', 1))
    with kernel(home) as k:
        wait_state(home, tid, "AwaitingApproval")
        (question,) = [q for q in task_approvals(home, tid) if q.status == "pending"]
        assert question.action_type == "tool_missing"
        assert "mcp__t__append" in question.description
        k.request("answer", approval_id=question.approval_id, decision="skip")
        wait_state(home, tid, "WaitingForUser")
        assert k.terminate() == 0
    assert len(starts(log, "append")) == 1
    assert step_statuses(home, tid) == {0: "skipped"}
    (hold / "append").unlink()
