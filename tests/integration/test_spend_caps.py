"""Spend caps through a real kernel: a loop task and a pipeline task about to pass their
cap park on a question (spent $X of $Y: continue with $Z more, or fail?), a "continue"
raises the cap once, a "fail" fails the task saying why; a day's cap holds the calls of
every task; `pfar costs` sums what was spent.
The scripted model reports each call's usage, priced by `[llm.prices.scripted]`.
Crash tests are in tests/crash/test_spend_caps_crash.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pfar.journal import TaskState
from pfar.journal.costs_sql import Spent
from pfar.kernel import open_kernel, spend_holds
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, Usage, reply
from pfar.vault.home import Home

from ..support import make_home, pfar

# $1 a token out, nothing in; each call answers 2 tokens ($2) and may answer 1 (max_tokens):
# with a cap of $5 the third call would reach it (4 spent + 1 it may cost)
PRICED = """
[llm]
max_tokens = 1
[llm.prices.scripted]
input = 0
output = 1000000
"""
LOOP = '[loop]\ntools = ["file.read"]\nalways_allow = ["file.read"]\n'
TEMPLATE = 'id = "note"\ndescription = "Note"\nallowed_tools = ["file.read"]\n'


def _usage() -> Usage:
    return Usage(input_tokens=10, output_tokens=2)


def _reads_forever(request: ChatRequest) -> ChatResponse:
    n = sum(1 for m in request.messages if m.role == "assistant")
    return reply(request, "", [ToolCall(f"r{n}", "file.read", {"path": "x"})], usage=_usage())


def _phases(request: ChatRequest) -> ChatResponse:
    phase = request.context.get("phase")
    if phase == "extract":
        call = ToolCall("m", "record_metadata", {"summary": "a note"})
        return reply(request, "", [call], usage=_usage())
    if phase == "plan":
        return reply(request, "", [ToolCall("p", "submit_plan", {"steps": []})], usage=_usage())
    return reply(request, "noted", usage=_usage())


async def _kernel(
    tmp_path: Path,
    handler: Callable[[ChatRequest], ChatResponse],
    budget: str,
    body: Callable[[Operator, Path], Any],
    *,
    priced: bool = True,
    extra: str = "",
) -> Any:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = make_home(
        tmp_path / "home",
        templates={"note": TEMPLATE},
        config=f"{PRICED if priced else ''}\n{extra or LOOP}\n[budget]\n{budget}\n",
    )
    async with open_kernel(home, model=ScriptedChatModel(handler)) as kernel:
        return await body(Operator(kernel), work)


async def _the_question(op: Operator, task_id: str) -> Any:
    assert (await op.task(task_id)).state is TaskState.AwaitingApproval
    (question,) = [a for a in (await op.questions()).approvals if a.task_id == task_id]
    assert question.action_type == "spend_cap"
    return question


def test_a_loop_task_at_its_cap_asks_and_continue_raises_it_once(tmp_path: Path) -> None:
    async def body(op: Operator, work: Path) -> None:
        task_id = (await op.start_loop("read x", str(work))).task_id
        await op.wait_idle()
        first = await _the_question(op, task_id)
        assert first.options == ["continue", "fail"]
        assert "spent $4.00 of its cap of $5.00" in first.description
        assert "continue with $5.00 more" in first.description
        assert (await op.journal.tasks.spent_by_task(task_id)).calls == 2
        await op.answer(first.approval_id, "continue")
        await op.wait_idle()
        # the cap is $10 now: three calls more ($10 spent), then the next would pass it
        second = await _the_question(op, task_id)
        assert second.approval_id != first.approval_id
        assert "spent $10.00 of its cap of $10.00" in second.description
        assert (await op.journal.tasks.spent_by_task(task_id)).calls == 5
        await op.answer(second.approval_id, "fail")
        await op.wait_idle()
        task = await op.task(task_id)
        assert task.state is TaskState.Failed
        assert "stopped at a spend cap by the owner" in (task.error or "")
        assert (await op.journal.tasks.spent_by_task(task_id)).calls == 5

    asyncio.run(_kernel(tmp_path, _reads_forever, "per_task_usd = 5", body))


def test_a_pipeline_task_at_its_cap_waits_in_its_phase_and_goes_on_after_continue(
    tmp_path: Path,
) -> None:
    async def body(op: Operator, work: Path) -> None:
        task_id = (await op.submit("note", "note this")).task_id
        await op.wait_idle()
        # extract and plan made their calls ($4): synthesis would reach the cap
        question = await _the_question(op, task_id)
        assert "Task note (" in question.description
        assert "spent $4.00 of its cap of $5.00" in question.description
        await op.answer(question.approval_id, "approve")  # the first option: continue
        await op.wait_idle()
        task = await op.task(task_id)
        assert task.state is TaskState.Completed, task.error
        spent = await op.journal.tasks.spent_by_task(task_id)
        assert (spent.calls, spent.cost_usd) == (3, 6.0)

    asyncio.run(_kernel(tmp_path, _phases, "per_task_usd = 5", body))


def test_a_cap_in_tokens_counts_tokens_in_and_out(tmp_path: Path) -> None:
    async def body(op: Operator, work: Path) -> None:
        task_id = (await op.submit("note", "note this")).task_id
        await op.wait_idle()
        question = await _the_question(op, task_id)
        spent = await op.journal.tasks.spent_by_task(task_id)
        assert spent.tokens == 12 * spent.calls  # 10 in and 2 out a call
        assert f"spent {spent.tokens} tokens of its cap of 50 tokens" in question.description
        await op.answer(question.approval_id, "fail")
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.Failed

    # the next call's estimate is its request's size (the phase's prompt) and max_tokens
    asyncio.run(_kernel(tmp_path, _phases, "per_task_tokens = 50", body))


def test_a_day_cap_holds_the_calls_of_every_task(tmp_path: Path) -> None:
    async def body(op: Operator, work: Path) -> None:
        first = (await op.submit("note", "one")).task_id
        await op.wait_idle()
        assert (await op.task(first)).state is TaskState.Completed  # $6 of the day's $9
        second = (await op.submit("note", "two")).task_id
        await op.wait_idle()
        question = await _the_question(op, second)  # $8 spent: the day's cap is near
        assert "Today has spent $8.00 of the day's cap of $9.00" in question.description
        costs = await op.costs("task")
        assert [line.key for line in costs.lines] == [first, second]
        assert costs.total.cost_usd == 8.0 and costs.unpriced_models == ()
        # a third task is held too, on its own question, and the owner is not told again
        third = (await op.submit("note", "three")).task_id
        await op.wait_idle()
        held = await _the_question(op, third)
        assert "Today has spent $8.00" in held.description
        assert await op.journal.tasks.spent_by_task(third) == Spent()
        told = [m["kind"] for m in await op.journal.events.for_task(second)]
        assert told == ["approval"]
        assert [m["kind"] for m in await op.journal.events.for_task(third)] == []
        # "continue" adds a day's cap for this task: it finishes ($12 spent today)
        await op.answer(question.approval_id, "continue")
        await op.wait_idle()
        assert (await op.task(second)).state is TaskState.Completed
        assert (await op.costs("day")).total.cost_usd == 12.0

    asyncio.run(_kernel(tmp_path, _phases, "per_day_usd = 9", body))


def test_no_cap_no_question_and_calls_of_a_model_with_no_price_are_unknown_not_free(
    tmp_path: Path,
) -> None:
    async def body(op: Operator, work: Path) -> None:
        task_id = (await op.submit("note", "note this")).task_id
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.Completed
        by_model = await op.costs("model")
        (line,) = by_model.lines
        assert (line.key, line.calls, line.unpriced_calls, line.cost_usd) == ("scripted", 3, 3, 0)
        assert by_model.unpriced_models == ("scripted",)
        (listed,) = (await op.task_page()).tasks
        assert (listed.cost_usd, listed.unpriced_calls) == (0, 3)

    asyncio.run(_kernel(tmp_path, _phases, "", body, priced=False))
    # as the owner reads them, with no kernel: never "$0.00" for calls of unknown cost
    home = Home(tmp_path / "home")
    (row,) = json.loads(pfar(home, "tasks", "--json").stdout)
    assert row["unpriced_calls"] == 3
    listed = pfar(home, "tasks").stdout
    assert "unknown" in listed and "$0.00" not in listed
    shown = pfar(home, "task", "show", row["task_id"]).stdout
    assert "spent: unknown on 3 model call(s)" in shown
    assert "3 of them had no price: their cost is unknown" in shown


def test_a_day_cap_raised_by_a_reload_lets_the_held_tasks_go_answered_by_the_kernel(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        work = tmp_path / "work"
        work.mkdir()
        home = make_home(
            tmp_path / "home",
            templates={"note": TEMPLATE},
            config=f"{PRICED}\n{LOOP}\n[budget]\nper_day_usd = 3\n",
        )
        async with open_kernel(home, model=ScriptedChatModel(_phases)) as kernel:
            op = Operator(kernel)
            first = (await op.submit("note", "one")).task_id
            await op.wait_idle()
            question = await _the_question(op, first)
            assert question.options == ["continue", "retry", "fail"]
            second = (await op.submit("note", "two")).task_id
            await op.wait_idle()
            quiet = await _the_question(op, second)  # held too, and no message of its own
            assert await op.journal.events.for_task(second) == []
            assert await spend_holds.lift(kernel) == []  # the cap still holds
            assert await op.journal.events.for_task(second) == []  # the owner was told
            # the owner fails the first: the second's question is sent now, once
            await op.answer(question.approval_id, "fail")
            await op.wait_idle()
            assert await spend_holds.lift(kernel) == []
            assert await spend_holds.lift(kernel) == []
            told = await op.journal.events.for_task(second)
            assert [(m["kind"], m["message_key"]) for m in told] == [
                ("approval", f"approval:{quiet.approval_id}:0")
            ]
            text = home.config.read_text().replace("per_day_usd = 3", "per_day_usd = 50")
            home.config.write_text(text)
            assert "budget" in (await op.reload()).applied  # it lets them go at once
            await op.wait_idle()
            assert (await op.task(second)).state is TaskState.Completed
            (answered,) = await op.journal.questions.approvals_for_task(second)
            assert answered.decision == "retry"
            assert answered.decided_by == "kernel (spend cap lifted)"
            assert (await op.task(first)).state is TaskState.Failed

    asyncio.run(go())


def test_a_summary_of_older_turns_that_would_pass_the_cap_asks_too(tmp_path: Path) -> None:
    summaries: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        if request.context.get("phase") == "loop_summary":
            summaries.append(request)
            return reply(request, "Earlier: wrote big.txt.", usage=_usage())
        n = sum(1 for m in request.messages if m.role == "assistant")
        big = "\n".join(f"line {i} " + "x" * 60 for i in range(120))
        call = ToolCall(f"w{n}", "file.write", {"path": "big.txt", "content": big})
        return reply(request, "", [call], usage=_usage())

    async def body(op: Operator, work: Path) -> None:
        task_id = (await op.start_loop("write big.txt", str(work))).task_id
        await op.wait_idle()
        question = await _the_question(op, task_id)  # asked, not failed
        assert summaries == []  # the summary's call was held before it went out
        spent = await op.journal.tasks.spent_by_task(task_id)
        assert spent.calls < 20  # far from $100 of the worker's calls: the summary's held
        assert f"has spent ${spent.cost_usd:,.2f} of its cap of $100.00" in question.description

    # the cheap tier (the summary's) costs $1 a token in: its call alone passes $100
    extra = (
        '[llm.tiers]\ncheap = "pricey"\n[llm.prices.pricey]\ninput = 1000000\noutput = 0\n'
        "[loop]\ncontext_tokens = 9000\nreserve_tokens = 1000\nkeep_recent_turns = 2\n"
        'tools = ["file.write"]\nalways_allow = ["file.write"]\n'
    )
    asyncio.run(_kernel(tmp_path, model, "per_task_usd = 100", body, extra=extra))


def test_a_call_whose_tool_results_would_pass_the_cap_asks_before_it_goes(
    tmp_path: Path,
) -> None:
    # the file read is most of the next call's input: 100,000 tokens at $10 a million,
    # $1.00 against a cap of $0.50, though the conversation's own text is short
    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.tool_results for m in request.messages):
            return reply(request, "", [ToolCall("r", "file.read", {"path": "big.txt"})])
        return reply(request, "read it")

    async def body(op: Operator, work: Path) -> None:
        (work / "big.txt").write_text("x" * 399_999 + "\n")
        task_id = (await op.start_loop("read big.txt", str(work))).task_id
        await op.wait_idle()
        question = await _the_question(op, task_id)
        assert "of its cap of $0.50" in question.description
        assert (await op.journal.tasks.spent_by_task(task_id)).calls == 1

    extra = (
        "[llm]\nmax_tokens = 1\n[llm.prices.scripted]\ninput = 10\noutput = 0\n"
        "[loop]\ncontext_tokens = 1000000\n" + LOOP.removeprefix("[loop]\n")
    )
    asyncio.run(_kernel(tmp_path, model, "per_task_usd = 0.5", body, priced=False, extra=extra))


def test_a_subtasks_calls_spend_from_its_root_tasks_cap(tmp_path: Path) -> None:
    # the parent delegates forever; each subtask reads once and answers: without a
    # shared cap each Task call would get a fresh $5
    def model(request: ChatRequest) -> ChatResponse:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if "A subtask of" in request.system:
            if n == 0:
                return reply(
                    request, "", [ToolCall("r", "file.read", {"path": "x"})], usage=_usage()
                )
            return reply(request, "read it", usage=_usage())
        task = ToolCall(f"t{n}", "Task", {"description": f"read {n}", "prompt": "Read x."})
        return reply(request, "", [task], usage=_usage())

    async def body(op: Operator, work: Path) -> None:
        (work / "x").write_text("x\n")
        root = (await op.start_loop("delegate", str(work))).task_id
        await op.wait_idle()

        async def tree_calls() -> int:
            ids = [root, *await op.journal.loops.children(root)]
            return sum(s.calls for s in (await op.journal.tasks.spent_by_tasks(ids)).values())

        # the parent's call ($2) and the child's first ($4): the child's second is held
        (child,) = await op.journal.loops.children(root)
        first = await _the_question(op, child)
        assert "spent $4.00 of its cap of $5.00" in first.description
        assert await tree_calls() == 2
        await op.answer(first.approval_id, "continue")  # the root's cap is $10 now
        await op.wait_idle()
        # the child's second ($6), the parent's next ($8), a new child's first ($10)
        assert (await op.task(child)).state is TaskState.Completed
        (second_child,) = [c for c in await op.journal.loops.children(root) if c != child]
        second = await _the_question(op, second_child)
        assert "spent $10.00 of its cap of $10.00" in second.description
        assert await tree_calls() == 5

    extra = '[loop]\ntools = ["file.read", "Task"]\nalways_allow = ["file.read"]\n'
    asyncio.run(_kernel(tmp_path, model, "per_task_usd = 5", body, extra=extra))
