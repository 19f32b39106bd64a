"""The agentic loop through a real kernel: a scripted chat model (a handler that answers
from the conversation it is sent), pfar's real tools in a real directory, the journal
on a real SQLite file. Crash tests are in tests/crash/test_loop_crash.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import BadRequest, TaskStateRefused
from pfar.journal import TaskState
from pfar.journal.records import parse_rfc3339
from pfar.journal.turns import AssistantTurn, ResultsTurn, SummaryTurn, UserTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import (
    ChatRequest,
    ChatResponse,
    ScriptedChatModel,
    StopReason,
    ToolCall,
    Usage,
    reply,
)

from ..support import make_home

TOOLS = '["file.read", "file.write", "shell.run"]'


def _home(tmp_path: Path, extra: str = "", allow: str = '["file.read"]') -> Any:
    return make_home(
        tmp_path / "home", config=f"[loop]\ntools = {TOOLS}\nalways_allow = {allow}\n{extra}"
    )


def _turn(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _results(request: ChatRequest) -> list[str]:
    return [r.content for r in request.messages[-1].tool_results]


async def _run(
    tmp_path: Path,
    handler: Callable[[ChatRequest], ChatResponse],
    body: Callable[[Operator, str, Path], Any],
    *,
    extra: str = "",
    allow: str = '["file.read"]',
    once: bool = False,
) -> Any:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = _home(tmp_path, extra, allow)
    async with open_kernel(home, model=ScriptedChatModel(handler)) as kernel:
        op = Operator(kernel)
        started = await op.start_loop("do the task", str(work), once=once)
        await op.wait_idle()
        return await body(op, started.task_id, work)


async def _turns(op: Operator, task_id: str) -> list[Any]:
    return [t.turn for t in await op.journal.loops.turns(task_id)]


def test_a_conversation_runs_its_calls_waits_for_the_owner_and_ends_with_its_summary(
    tmp_path: Path,
) -> None:
    seen: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        if _turn(request) == 0:
            return reply(
                request,
                "Writing, then reading back.",
                [
                    ToolCall("w", "file.write", {"path": "a.txt", "content": "hello"}),
                    ToolCall("r", "file.read", {"path": "a.txt"}),
                ],
            )
        if request.messages[-1].text == "and now?":
            return reply(request, "All done: a.txt holds hello.")
        return reply(request, "I wrote a.txt. Anything else?")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        assert (work / "a.txt").read_text() == "hello"
        turns = await _turns(op, task_id)
        assert [type(t) for t in turns] == [UserTurn, AssistantTurn, ResultsTurn, AssistantTurn]
        results = turns[2].results
        assert [r.call_id for r in results] == ["w", "r"]
        assert json.loads(results[1].content)["content"] == "hello"
        assert not any(r.is_error for r in results)
        # the second request carried both calls and both results, in the API's shape
        second = seen[1].messages
        assert [c.id for c in second[1].tool_calls] == ["w", "r"]
        assert [r.tool_call_id for r in second[2].tool_results] == ["w", "r"]
        assert "Working directory: " + str(work) in seen[0].system

        sent = await op.send(task_id, "and now?")
        assert sent.command is None
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        done = await op.send(task_id, "/done")
        assert done.command == "/done"
        await op.wait_idle()
        summary = await op.task(task_id)
        assert summary.state is TaskState.Completed
        row = await op.journal.tasks.get(task_id)
        assert row.execute_progress is not None
        assert row.execute_progress["result"] == "All done: a.txt holds hello."
        assert row.execute_progress["iterations"] == 3

    asyncio.run(_run(tmp_path, model, body, allow='["file.read", "file.write"]'))


def test_tool_errors_unknown_tools_bad_arguments_and_policy_refusals_go_back_to_the_model(
    tmp_path: Path,
) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        if _turn(request) == 0:
            return reply(
                request,
                "",
                [
                    ToolCall("a", "nope.tool", {}),
                    ToolCall("b", "file.read", {"file": "x"}),
                    ToolCall("c", "file.read", {"path": "missing.txt"}),
                    ToolCall("d", "file.write", {"path": ".env", "content": "K=V"}),
                ],
            )
        return reply(request, "I see: " + " | ".join(_results(request)))

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        turns = await _turns(op, task_id)
        results = {r.call_id: r for r in turns[2].results}
        assert all(r.is_error for r in results.values())
        assert results["a"].content.startswith("Unknown tool: nope.tool (the tools are: ")
        assert results["b"].content.startswith("Invalid parameters: file.read")
        assert "No such file" in results["c"].content
        assert "protected path" in results["d"].content and "'.env'" in results["d"].content
        assert not (work / ".env").exists()
        steps = await op.journal.tasks.steps(task_id)
        assert [s.status.value for s in steps] == ["failed"] * 4

    asyncio.run(_run(tmp_path, model, body, allow='["file.read", "file.write"]'))


def _writes_twice(request: ChatRequest) -> ChatResponse:
    """Two tasks' worth of the same write: the second shows whether "always" was kept."""
    if _turn(request) == 0:
        return reply(request, "", [ToolCall("w", "file.write", {"path": "p.txt", "content": "1"})])
    return reply(request, "result: " + " | ".join(_results(request)))


@pytest.mark.parametrize(
    ("answer", "ran", "told", "kept"),
    [
        ("approve", True, None, None),
        ("deny", False, "The owner denied permission for this call", None),
        ("always", True, None, "allow"),
        ("never", False, "never allows file.write", "deny"),
    ],
)
def test_a_permission_prompt_takes_four_answers_and_keeps_always_and_never(
    tmp_path: Path, answer: str, ran: bool, told: str | None, kept: str | None
) -> None:
    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.AwaitingApproval
        (question,) = (await op.questions()).approvals
        assert question.action_type == "permission"
        assert question.options == ["approve", "deny", "always", "never"]
        assert question.description.startswith("Allow file.write: p.txt?")
        await op.answer(question.approval_id, answer)
        await op.wait_idle()
        assert (work / "p.txt").exists() is ran
        results = (await _turns(op, task_id))[2].results
        if told:
            assert told in results[0].content and results[0].is_error
        rules = await op.journal.loops.rules()
        assert [(r.tool, r.pattern, r.decision) for r in rules] == (
            [("file.write", "p.txt", kept)] if kept else []
        )
        # a later task: a kept answer applies without asking; otherwise it asks again
        (work / "p.txt").unlink(missing_ok=True)
        later = await op.start_loop("again", str(work))
        await op.wait_idle()
        state = (await op.task(later.task_id)).state
        assert state is (TaskState.AwaitingApproval if kept is None else TaskState.WaitingForUser)
        assert (work / "p.txt").exists() is (kept == "allow")

    asyncio.run(_run(tmp_path, _writes_twice, body))


def test_an_unanswered_permission_prompt_is_a_no_and_the_loop_goes_on(tmp_path: Path) -> None:
    async def body(op: Operator, task_id: str, work: Path) -> None:
        for _ in range(100):
            if (await op.task(task_id)).state is TaskState.WaitingForUser:
                break
            await asyncio.sleep(0.1)
        turns = await _turns(op, task_id)
        assert "no answer from the owner in time" in turns[2].results[0].content
        assert not (work / "p.txt").exists()

    asyncio.run(_run(tmp_path, _writes_twice, body, extra="permission_timeout_seconds = 0.5\n"))


def test_an_answer_cut_off_at_its_token_limit_is_continued(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        if _turn(request) == 0:
            return reply(request, "The first half", stop_reason=StopReason.max_tokens)
        return reply(request, "and the second half.")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        turns = await _turns(op, task_id)
        assert [type(t) for t in turns] == [UserTurn, AssistantTurn, UserTurn, AssistantTurn]
        assert turns[2].source == "continue" and "token limit" in turns[2].text
        assert (await op.task(task_id)).state is TaskState.WaitingForUser

    asyncio.run(_run(tmp_path, model, body))


def test_a_runaway_loop_is_stopped_and_the_owner_asked(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        return reply(request, "", [ToolCall(f"r{_turn(request)}", "file.read", {"path": "x"})])

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.AwaitingApproval
        (question,) = (await op.questions()).approvals
        assert question.action_type == "drift"
        assert "its last 3 tool calls failed (limit 3)" in question.description
        await op.answer(question.approval_id, "fail")
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.Failed

    asyncio.run(_run(tmp_path, model, body, extra="max_tool_failures = 3\n"))


def test_a_long_conversation_is_summarized_by_the_cheap_tier_once(tmp_path: Path) -> None:
    summaries: list[ChatRequest] = []
    calls: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        if request.context.get("phase") == "loop_summary":
            summaries.append(request)
            return reply(request, "Earlier: wrote big.txt several times.")
        calls.append(request)  # the summary hides older turns: count the calls instead
        n = len(calls)
        if n < 8:
            big = "\n".join(f"line {i} " + "x" * 60 for i in range(120))
            return reply(
                request, "", [ToolCall(f"w{n}", "file.write", {"path": "big.txt", "content": big})]
            )
        return reply(request, "finished")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        asked = [a.description for a in (await op.questions()).approvals]
        assert (await op.task(task_id)).state is TaskState.WaitingForUser, asked
        turns = await _turns(op, task_id)
        assert sum(isinstance(t, SummaryTurn) for t in turns) >= 1
        assert len(summaries) == sum(isinstance(t, SummaryTurn) for t in turns)
        assert "Summarize" in summaries[0].system

    extra = "context_tokens = 9000\nreserve_tokens = 1000\nkeep_recent_turns = 2\n"
    asyncio.run(_run(tmp_path, model, body, extra=extra, allow='["file.read", "file.write"]'))


def test_bad_input_to_loop_and_send_is_refused_by_name(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        return reply(request, "hello")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        with pytest.raises(BadRequest, match="directory"):
            await op.start_loop("x", str(work / "nowhere"))
        with pytest.raises(BadRequest, match="prompt"):
            await op.start_loop("   ", str(work))
        with pytest.raises(BadRequest, match="tier"):
            await op.start_loop("x", str(work), tier="huge")
        with pytest.raises(BadRequest, match="/frobnicate"):
            await op.send(task_id, "/frobnicate")
        with pytest.raises(BadRequest, match="text"):
            await op.send(task_id, "   ")
        await op.send(task_id, "/done")
        await op.wait_idle()
        with pytest.raises(TaskStateRefused, match="ended"):
            await op.send(task_id, "more")

    asyncio.run(_run(tmp_path, model, body))


def test_retry_discards_the_waiting_answer_and_asks_the_model_again(tmp_path: Path) -> None:
    asked: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        asked.append(request)
        return reply(request, f"answer {len(asked)}")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        sent = await op.send(task_id, "/retry")
        assert sent.command == "/retry"
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        turns = await _turns(op, task_id)
        assert [t.kind for t in turns] == ["user", "assistant", "discard", "assistant"]
        assert [t.text for t in turns if isinstance(t, AssistantTurn)] == ["answer 1", "answer 2"]
        # the model was asked again with the conversation as it was before answer 1
        assert [m.text for m in asked[1].messages] == ["do the task"]
        timeline = await op.timeline(task_id)
        assert any("/retry" in e.words for e in timeline.entries)
        done = await op.send(task_id, "/done")
        assert done.command == "/done"
        await op.wait_idle()
        row = await op.journal.tasks.get(task_id)
        assert row.execute_progress is not None
        assert row.execute_progress["result"] == "answer 2"
        assert row.execute_progress["iterations"] == 1  # the discarded answer is not counted
        # ended: nothing waits to be asked again, and it did not fail
        with pytest.raises(TaskStateRefused, match="Completed: it has ended without failing"):
            await op.send(task_id, "/retry")

    asyncio.run(_run(tmp_path, model, body))


def test_context_tells_how_full_the_context_is(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        if _turn(request) == 0:
            call = ToolCall("r", "file.read", {"path": "big.txt"})
            return ChatResponse("", (call,), StopReason.tool_use, Usage(1200, 30), request.model)
        return ChatResponse("read it", (), StopReason.end_turn, Usage(9000, 40), request.model)

    async def body(op: Operator, task_id: str, work: Path) -> None:
        sent = await op.send(task_id, "/context")
        assert sent.command == "/context" and sent.state is TaskState.WaitingForUser
        stats = sent.context
        assert stats is not None
        assert stats.turns == 4 and stats.shown == 4
        assert stats.summarized_upto is None
        assert stats.budget == 180_000 - 16_000
        # the file's 40,000 characters are in the conversation: about 10,000 tokens
        assert 10_000 < stats.estimated_tokens < 13_000
        assert (stats.last_input_tokens, stats.last_output_tokens) == (9000, 40)
        assert stats.total_tokens == 1200 + 30 + 9000 + 40
        # a look changes nothing
        assert len(await _turns(op, task_id)) == 4

    def setup_and_run() -> Any:
        work = tmp_path / "work"
        work.mkdir()
        (work / "big.txt").write_text("x" * 40_000)
        return _run(tmp_path, model, body)

    asyncio.run(setup_and_run())


def test_after_repeated_tool_failures_the_model_is_asked_one_tier_up(tmp_path: Path) -> None:
    models: list[str] = []

    def model(request: ChatRequest) -> ChatResponse:
        models.append(request.model)
        turn = _turn(request)
        if turn < 4:  # three calls that fail, then one that works
            path = "missing.txt" if turn < 3 else "here.txt"
            return reply(request, "", [ToolCall(f"r{turn}", "file.read", {"path": path})])
        return reply(request, "read it")

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        worker, planner = "model-w", "model-p"
        assert models == [worker, worker, worker, planner, worker]
        answers = [t for t in await _turns(op, task_id) if isinstance(t, AssistantTurn)]
        assert [a.model for a in answers] == models  # the journal says who answered

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "here.txt").write_text("x")
    tiers = '\n[llm.tiers]\nworker = "model-w"\nplanner = "model-p"\n'
    asyncio.run(_run(tmp_path, model, body, extra=tiers))


def test_a_permission_prompt_expires_after_five_minutes_by_default(tmp_path: Path) -> None:
    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.AwaitingApproval
        (question,) = (await op.questions()).approvals
        stored = await op.journal.questions.approval(question.approval_id)
        lasts = parse_rfc3339(stored.expires_at) - parse_rfc3339(stored.created_at)
        assert lasts.total_seconds() == pytest.approx(300, abs=2)

    asyncio.run(_run(tmp_path, _writes_twice, body))


def test_a_tool_that_times_out_is_ended_and_the_model_told(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        if _turn(request) == 0:
            call = ToolCall("s", "shell.run", {"argv": ["sh", "-c", "sleep 30"]})
            return reply(request, "", [call])
        return reply(request, "told: " + " | ".join(_results(request)))

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        (result,) = (await _turns(op, task_id))[2].results
        assert result.is_error and "did not finish within 0.5s" in result.content
        step = await op.journal.tasks.step(task_id, 0)
        assert step is not None and step.status.value == "failed"

    asyncio.run(
        _run(
            tmp_path,
            model,
            body,
            allow='["file.read", "shell.run"]',
            extra="tool_seconds = 0.5\n",
        )
    )
