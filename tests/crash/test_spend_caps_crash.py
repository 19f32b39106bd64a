"""Spend caps killed with SIGKILL: a count comes from the journal, so a kill never resets
it; a call's usage is committed with its answer; a cap's question outlives a kill, and
its answer raises the cap once: killed before the answer and right after it, the task
goes on to the raised cap and asks a new question, never applying the old answer again;
a day's cap holds the calls of a task started after a restart."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.journal.costs_sql import Spent
from pfar.journal.owner_records import ApprovalRecord
from pfar.vault.home import Home

from ..support import (
    make_home,
    owner_messages,
    pfar,
    read_journal,
    task_approvals,
    task_states,
    wait_for,
)
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash

# each turn reads a file and reports 10 tokens in, 2 out: $2 at $1 a token out; the next
# call may answer 1 token (max_tokens), so a $5 cap is reached after two calls ($4 + $1)
SCRIPT = """
[[turns]]
text = "Reading."
tool_calls = [{ name = "file.read", input = { path = "x" } }]
input_tokens = 10
output_tokens = 2
"""
CONFIG = """
[llm]
max_tokens = 1
[llm.prices.scripted]
input = 0
output = 1000000
[loop]
tools = ["file.read"]
always_allow = ["file.read"]
[budget]
"""


def _home(tmp_path: Path, budget: str) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = make_home(
        tmp_path / "home", script=textwrap.dedent(SCRIPT), config=CONFIG.lstrip() + budget
    )
    return home, work


def _start(k: Any, work: Path, prompt: str = "read x") -> str:
    return str(k.request("loop", prompt=prompt, directory=str(work))["task_id"])


def _spent(home: Home, task_id: str) -> Spent:
    return read_journal(home, lambda s: s.tasks.spent_by_task(task_id))


def _pending(home: Home, task_id: str) -> list[ApprovalRecord]:
    return [q for q in task_approvals(home, task_id) if q.status == "pending"]


def _asked(home: Home, task_id: str) -> ApprovalRecord:
    wait_for(lambda: _pending(home, task_id), what="the spend cap's question")
    (question,) = _pending(home, task_id)
    assert question.action_type == "spend_cap"
    return question


@pytest.mark.both_backends
def test_a_kill_after_an_answer_was_journaled_keeps_its_usage_in_the_count(
    tmp_path: Path,
) -> None:
    home, work = _home(tmp_path, "per_task_usd = 5\n")
    with kernel(home, fault="llm_response_received") as k:
        with contextlib.suppress(Exception):  # the kernel may die under the request
            _start(k, work)
        assert k.killed_by_fault(), k.output()
    (tid,) = task_states(home)
    assert _spent(home, tid) == Spent(1, 10, 2, 2.0, 0)  # committed with its answer

    with kernel(home):
        question = _asked(home, tid)
        # one call more after the restart: the cap counts the one made before the kill
        assert "spent $4.00 of its cap of $5.00" in question.description
        assert _spent(home, tid) == Spent(2, 20, 4, 4.0, 0)
        # the report says what the task had spent when it was resumed
        wait_for(
            lambda: home.owner_log.exists() and "Recovery report" in home.owner_log.read_text(),
            what="the report",
        )
        (report,) = [m["body"] for m in owner_messages(home) if "Recovery report" in m["body"]]
        assert "1 task resumed (read x" in report and "$2.00 spent (12 tokens)" in report


def test_the_report_says_a_cost_is_unknown_when_no_call_had_a_price(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    unpriced = CONFIG.replace("[llm.prices.scripted]\ninput = 0\noutput = 1000000\n", "")
    home = make_home(tmp_path / "home", script=textwrap.dedent(SCRIPT), config=unpriced)
    with kernel(home, fault="llm_response_received") as k:
        with contextlib.suppress(Exception):  # the kernel may die under the request
            _start(k, work)
        assert k.killed_by_fault(), k.output()
    (tid,) = task_states(home)
    assert _spent(home, tid) == Spent(1, 10, 2, 0.0, 1)

    with kernel(home):
        wait_for(
            lambda: home.owner_log.exists() and "Recovery report" in home.owner_log.read_text(),
            what="the report",
        )
        (report,) = [m["body"] for m in owner_messages(home) if "Recovery report" in m["body"]]
        assert "1 task resumed (read x" in report, report
        assert "cost unknown (12 tokens; its model has no price)" in report, report
        assert "$0" not in report, report


@pytest.mark.both_backends
def test_a_continue_is_spent_once_killed_before_the_answer_and_right_after_it(
    tmp_path: Path,
) -> None:
    home, work = _home(tmp_path, "per_task_usd = 5\n")
    with kernel(home) as k:
        tid = _start(k, work)
        first = _asked(home, tid)
        k.kill()  # before the answer

    with kernel(home, fault="approval_decided") as k:
        wait_state(home, tid, "AwaitingApproval")
        assert [q.approval_id for q in _pending(home, tid)] == [first.approval_id]
        assert _spent(home, tid).calls == 2  # nothing ran while it waited
        with contextlib.suppress(Exception):
            k.request("answer", approval_id=first.approval_id, decision="continue")
        assert k.killed_by_fault(), k.output()
    assert _spent(home, tid).calls == 2

    with kernel(home) as k:
        again = _asked(home, tid)
        assert again.approval_id != first.approval_id
        # raised once, by $5: three calls more, to $10, then a new question
        assert "spent $10.00 of its cap of $10.00" in again.description
        assert _spent(home, tid).calls == 5
        k.request("answer", approval_id=again.approval_id, decision="fail")
        wait_state(home, tid, "Failed")
    assert _spent(home, tid).calls == 5
    decided = {q.approval_id: q.decision for q in task_approvals(home, tid)}
    assert decided == {first.approval_id: "continue", again.approval_id: "fail"}


@pytest.mark.both_backends
def test_a_day_cap_holds_the_calls_of_a_task_started_after_a_restart(tmp_path: Path) -> None:
    home, work = _home(tmp_path, "per_day_usd = 5\n")
    with kernel(home) as k:
        first = _start(k, work, "one")
        question = _asked(home, first)
        assert "Today has spent $4.00 of the day's cap of $5.00" in question.description
        k.kill()

    with kernel(home) as k:
        second = _start(k, work, "two")
        held = _asked(home, second)
        # no call went out for it: the day's $4 was counted from the journal
        assert "Today has spent $4.00 of the day's cap of $5.00" in held.description
        assert _spent(home, second).calls == 0
        assert [q.approval_id for q in _pending(home, first)] == [question.approval_id]
        # refused by the running kernel as by the vault below: the option named, exit 2
        bad = pfar(home, "costs", "--since", "x")
        assert bad.returncode == 2, bad.stderr
        assert "Invalid value for --since: must be a day as YYYY-MM-DD, not 'x'" in bad.stderr
    # read without a kernel, as the owner reads them
    listed = pfar(home, "tasks").stdout
    assert "$4.00" in listed and "$0.00" in listed
    by_task = pfar(home, "costs", "--by", "task").stdout.splitlines()
    assert by_task[2].split() == [first[:8], "2", "20", "4", "$4.0000"]
    assert by_task[-1].split() == ["total", "2", "20", "4", "$4.0000"]
    bad = pfar(home, "costs", "--since", "2030-13-01")
    assert bad.returncode == 2 and "--since: must be a day as YYYY-MM-DD" in bad.stderr
    late = pfar(home, "costs", "--since", "2030-01-02", "--until", "2030-01-01")
    assert late.returncode == 2 and "--until: 2030-01-01 is before since" in late.stderr
    shown = pfar(home, "task", "show", first).stdout
    assert "spent: $4.00 on 2 model call(s), 24 tokens" in shown
    assert "model call scripted/scripted: 10 tokens in, 2 out, $2.000000" in shown


NOTE = 'id = "note"\ndescription = "Note"\nallowed_tools = ["file.read"]\n'
PHASES = """
[[responses]]
template = "note"
phase = "extract"
json = { summary = "a note" }
input_tokens = 10
output_tokens = 2

[[responses]]
template = "note"
phase = "plan"
json = { steps = [] }
input_tokens = 10
output_tokens = 2

[[responses]]
template = "note"
phase = "synthesize"
text = "noted"
input_tokens = 10
output_tokens = 2
"""


@pytest.mark.both_backends
def test_a_pipeline_task_at_its_cap_resumes_its_phase_once_across_two_kills(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"note": NOTE},
        script=textwrap.dedent(PHASES),
        config=CONFIG.lstrip() + "per_task_usd = 5\n",
    )
    with kernel(home) as k:
        tid = str(k.request("submit", template="note", text="note this")["task_id"])
        first = _asked(home, tid)  # extract and plan spent $4: synthesis would reach $5
        assert "spent $4.00 of its cap of $5.00" in first.description
        k.kill()

    with kernel(home, fault="approval_decided") as k:
        wait_state(home, tid, "AwaitingApproval")
        with contextlib.suppress(Exception):
            k.request("answer", approval_id=first.approval_id, decision="continue")
        assert k.killed_by_fault(), k.output()
    assert _spent(home, tid).calls == 2  # killed before the synthesis's call

    with kernel(home):
        wait_state(home, tid, "Completed")
    assert _spent(home, tid) == Spent(3, 30, 6, 6.0, 0)  # one synthesis, after the answer
    assert [q.decision for q in task_approvals(home, tid)] == ["continue"]


@pytest.mark.both_backends
def test_a_continue_past_the_days_cap_is_spent_once_across_two_kills(tmp_path: Path) -> None:
    home, work = _home(tmp_path, "per_day_usd = 5\n")
    with kernel(home) as k:
        tid = _start(k, work)
        first = _asked(home, tid)
        assert first.options == ["continue", "retry", "fail"]
        assert "Today has spent $4.00 of the day's cap of $5.00" in first.description
        k.kill()  # before the answer

    with kernel(home, fault="approval_decided") as k:
        wait_state(home, tid, "AwaitingApproval")
        with contextlib.suppress(Exception):
            k.request("answer", approval_id=first.approval_id, decision="continue")
        assert k.killed_by_fault(), k.output()

    with kernel(home) as k:
        again = _asked(home, tid)
        assert again.approval_id != first.approval_id
        # this task may spend $5 more today, once: to $10, then a new question
        assert "Today has spent $10.00 of the day's cap of $10.00" in again.description
        assert _spent(home, tid).calls == 5
        k.request("answer", approval_id=again.approval_id, decision="fail")
        wait_state(home, tid, "Failed")
    assert _spent(home, tid).calls == 5
