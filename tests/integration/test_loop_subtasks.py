"""The Task tool through a real kernel: a subtask runs its own loop while its parent is
blocked in the journal, and the child's answer (or its end) is the parent's result.
A child killed mid-way is in tests/crash/test_loop_subtasks_crash.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pfar.journal import TaskState
from pfar.journal.payloads import Blocked
from pfar.journal.turns import ResultsTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..support import make_home

CHILD = "A subtask of"


def _turn(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _results(request: ChatRequest) -> list[str]:
    return [r.content for r in request.messages[-1].tool_results]


def _delegating(child_allowed: bool = True) -> Callable[[ChatRequest], ChatResponse]:
    """The parent delegates a write to a subtask; the child writes and answers."""

    def model(request: ChatRequest) -> ChatResponse:
        if CHILD in request.system:
            if _turn(request) == 0:
                call = ToolCall("cw", "file.write", {"path": "b.txt", "content": "from child"})
                return reply(request, "", [call])
            return reply(request, "I wrote b.txt: " + " | ".join(_results(request)))
        if _turn(request) == 0:
            task = ToolCall(
                "t1", "Task", {"description": "write b", "prompt": "Write b.txt for me."}
            )
            return reply(request, "Delegating.", [task])
        return reply(request, "The subtask said: " + " | ".join(_results(request)))

    return model


async def _run(
    tmp_path: Path,
    handler: Callable[[ChatRequest], ChatResponse],
    body: Callable[[Operator, str, Path], Any],
    *,
    allow: str = '["file.read", "file.write"]',
    extra: str = "",
) -> Any:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = f'[loop]\ntools = ["file.read", "file.write", "Task"]\nalways_allow = {allow}\n{extra}'
    home = make_home(tmp_path / "home", config=config)
    async with open_kernel(home, model=ScriptedChatModel(handler)) as kernel:
        op = Operator(kernel)
        started = await op.start_loop("delegate the write", str(work))
        await op.wait_idle()
        return await body(op, started.task_id, work)


def test_a_subtask_runs_its_own_loop_and_its_answer_is_the_parents_result(
    tmp_path: Path,
) -> None:
    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        (child_id,) = await op.journal.loops.children(task_id)
        child = await op.journal.tasks.get(child_id)
        assert child.state is TaskState.Completed
        assert (work / "b.txt").read_text() == "from child"
        settings = await op.journal.loops.settings(child_id)
        assert (settings.parent_task_id, settings.parent_step, settings.depth) == (task_id, 0, 1)
        assert settings.once and settings.title == "write b"
        turns = [t.turn for t in await op.journal.loops.turns(task_id)]
        results = turns[2]
        assert isinstance(results, ResultsTurn)
        (result,) = results.results
        assert not result.is_error and result.content.startswith("I wrote b.txt")
        step = await op.journal.tasks.step(task_id, 0)
        assert step is not None and step.tool == "Task" and step.status.value == "completed"
        # the owner hears the parent's answer, not the child's as well
        bodies = [m["body"] for m in await op.journal.events.for_task(child_id)]
        assert not any("finished" in b for b in bodies)

    asyncio.run(_run(tmp_path, _delegating(), body))


def test_the_parent_is_blocked_holding_no_coroutine_while_its_child_waits(tmp_path: Path) -> None:
    """The child's write asks permission: the parent is Blocked in the journal, not
    running; answering the child's question unblocks the parent."""

    async def body(op: Operator, task_id: str, work: Path) -> None:
        parent = await op.task(task_id)
        assert parent.state is TaskState.Blocked
        row = await op.journal.tasks.get(task_id)
        assert isinstance(row.payload, Blocked) and row.payload.step == 0
        child_id = row.payload.child_task_id
        # wait_idle returned: no coroutine holds the parent (or anything else)
        assert (await op.task(child_id)).state is TaskState.AwaitingApproval
        (question,) = (await op.questions()).approvals
        assert question.task_id == child_id
        await op.answer(question.approval_id, "approve")
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        assert (work / "b.txt").read_text() == "from child"

    asyncio.run(_run(tmp_path, _delegating(), body, allow='["file.read"]'))


def test_cancelling_the_child_tells_the_parent_and_cancelling_a_parent_ends_its_child(
    tmp_path: Path,
) -> None:
    async def body(op: Operator, task_id: str, work: Path) -> None:
        row = await op.journal.tasks.get(task_id)
        assert isinstance(row.payload, Blocked)
        child_id = row.payload.child_task_id
        await op.cancel(child_id)
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        turns = [t.turn for t in await op.journal.loops.turns(task_id)]
        results = turns[2]
        assert isinstance(results, ResultsTurn)
        assert results.results[0].is_error
        assert "was cancelled by the owner" in results.results[0].content
        assert not (work / "b.txt").exists()

        # a second task: its parent is cancelled while its child waits on the owner
        again = await op.start_loop("delegate the write", str(work))
        await op.wait_idle()
        blocked = await op.journal.tasks.get(again.task_id)
        assert isinstance(blocked.payload, Blocked)
        second_child = blocked.payload.child_task_id
        await op.cancel(again.task_id)
        await op.wait_idle()
        assert (await op.task(second_child)).state is TaskState.Cancelled
        assert not (await op.questions()).approvals  # the child's question withdrawn

    asyncio.run(_run(tmp_path, _delegating(), body, allow='["file.read"]'))


def test_subtasks_nest_no_deeper_than_max_depth(tmp_path: Path) -> None:
    seen: list[ChatRequest] = []

    def model(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        if _turn(request) == 0:
            task = ToolCall("t", "Task", {"description": "deeper", "prompt": "go deeper"})
            return reply(request, "", [task])
        return reply(request, "result: " + " | ".join(_results(request)))

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        (child_id,) = await op.journal.loops.children(task_id)
        assert await op.journal.loops.children(child_id) == []
        child_turns = [t.turn for t in await op.journal.loops.turns(child_id)]
        refused = child_turns[2]
        assert isinstance(refused, ResultsTurn) and refused.results[0].is_error
        assert "Subtasks nest at most 1 deep" in refused.results[0].content
        # the child, at the limit, was not offered the Task tool
        child_requests = [r for r in seen if CHILD in r.system]
        assert all("Task" not in [t.name for t in r.tools] for r in child_requests)
        assert "Task" in [t.name for t in seen[0].tools]

    asyncio.run(_run(tmp_path, model, body, extra="max_depth = 1\n"))


def test_a_task_call_with_bad_arguments_is_refused_to_the_model(tmp_path: Path) -> None:
    def model(request: ChatRequest) -> ChatResponse:
        if _turn(request) == 0:
            return reply(request, "", [ToolCall("t", "Task", {"prompt": ""})])
        return reply(request, "result: " + " | ".join(_results(request)))

    async def body(op: Operator, task_id: str, work: Path) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        assert await op.journal.loops.children(task_id) == []
        turns = [t.turn for t in await op.journal.loops.turns(task_id)]
        results = turns[2]
        assert isinstance(results, ResultsTurn)
        content = results.results[0].content
        assert content.startswith("Invalid parameters: Task") and "description" in content

    asyncio.run(_run(tmp_path, model, body))
