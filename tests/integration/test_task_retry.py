"""`retry` (`pfar task retry`) through a real kernel: a loop task whose model call fails
on the Anthropic loopback server's 500s (after pfar's own retries) is Failed
recoverably; retried, it continues the same conversation and completes, its command
not run again (its far side: a log outside the task). Two retries at once have one
effect. A task that did not fail, or failed by the owner's denial, is refused with
its state and why."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pfar import Home, Operator, init_home, open_kernel
from pfar.answers import Actor
from pfar.errors import TaskStateRefused
from pfar.journal import TaskState
from pfar.journal.payloads import Blocked, Executing, Failed, Synthesizing
from pfar.kernel.api import timeline_entries as e
from pfar.kernel.retrying import RetryOutcome, RetryResult
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..recording_server import RecordingServer
from ..support import make_home
from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_error_reply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)

OWNER = Actor("cli", "uid 1000, pid 42")


def _home(tmp_path: Path, server: ScriptedLLMServer) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(
        f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{server.url}"\n'
        "[llm.retry]\nmax_retries = 1\nbackoff_seconds = [0.0]\n"
        '[loop]\ntools = ["shell.run"]\nalways_allow = ["shell.run"]\n'
    )
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("anthropic_api_key", "sk-ant-test-key-4321")
    store.close()
    return home


def _command(log: Path) -> SSEReply:
    argv = {"argv": ["sh", "-c", f"echo ran >> {log}"]}
    return SSEReply(
        anthropic_stream(
            anthropic_text_block(0, ["Running it."]),
            anthropic_tool_use_block(1, "toolu_1", "shell.run", [json.dumps(argv)]),
            stop_reason="tool_use",
        )
    )


def test_a_failed_model_call_is_retried_from_the_journal_once(tmp_path: Path) -> None:
    work, log = tmp_path / "work", tmp_path / "effects.log"
    work.mkdir()
    with ScriptedLLMServer() as server:
        home = _home(tmp_path, server)
        # the command, then the next call fails: 500, and 500 again on pfar's own retry
        server.script(_command(log), anthropic_error_reply(500, "internal"))
        server.script(anthropic_error_reply(500, "internal"))

        async def run() -> tuple[Failed, list[RetryResult | BaseException], str]:
            async with open_kernel(home) as kernel:
                op = Operator(kernel, OWNER)
                task = await kernel.start_loop(LoopRequest("run it", str(work), once=True))
                await kernel.wait_idle()
                failed = (await kernel.journal.tasks.get(task.task_id)).payload
                assert isinstance(failed, Failed)
                server.script(SSEReply(anthropic_stream(anthropic_text_block(0, ["It ran."]))))
                # twice at once: one retry, one refusal (it is Failed no more)
                both = await asyncio.gather(
                    op.retry(task.task_id[:8]), op.retry(task.task_id), return_exceptions=True
                )
                await kernel.wait_idle()
                return failed, list(both), task.task_id

        failed, both, task_id = asyncio.run(run())
        bodies = [r.body for r in server.requests]
    assert failed.recoverable and failed.retry_count == 0
    assert failed.then is not None and failed.then.kind == "Executing"
    done = [r for r in both if isinstance(r, RetryResult)]
    refused = [r for r in both if isinstance(r, TaskStateRefused)]
    assert len(done) == 1 and len(refused) == 1, both
    assert done[0].outcome is RetryOutcome.retried and done[0].retry_count == 1
    assert "not recoverable" not in str(refused[0])
    assert log.read_text().split() == ["ran"]  # the command ran once, before the failure
    assert len(bodies) == 4  # the command's call, the failed call and its retry, the retry's
    assert bodies[3]["messages"] == bodies[1]["messages"]  # the same conversation goes on

    async def read() -> tuple[TaskState, tuple[e.Entry, ...]]:
        async with open_kernel(home) as kernel:
            op = Operator(kernel, OWNER)
            timeline = await op.timeline(task_id)
            with pytest.raises(TaskStateRefused, match="Completed: it has ended without failing"):
                await op.retry(task_id)
            return timeline.task.state, timeline.entries

    state, entries = asyncio.run(read())
    assert state == "Completed"
    (retried,) = [x for x in entries if isinstance(x, e.Retried)]
    assert retried.by == OWNER and retried.retry == 1 and retried.state == "Executing"
    assert "the model call failed" in retried.error and "internal" in retried.error
    assert retried.words.startswith("retried (retry 1, Executing) by cli (uid 1000, pid 42)")


def test_a_task_that_did_not_fail_or_failed_by_the_owners_word_is_refused(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", examples=True)  # run_command asks before it runs
    effects = tmp_path / "effects.log"

    async def run() -> None:
        async with open_kernel(home) as kernel:
            op = Operator(kernel, OWNER)
            asking = await op.submit("run_command", f"echo ran >> {effects}")
            await kernel.wait_idle()
            with pytest.raises(TaskStateRefused, match="AwaitingApproval: it has not failed"):
                await op.retry(asking.task_id)
            (question,) = (await op.questions()).approvals
            await op.answer(question.approval_id, "deny")
            await kernel.wait_idle()
            denied = await kernel.journal.tasks.get(asking.task_id)
            assert isinstance(denied.payload, Failed) and not denied.payload.recoverable
            with pytest.raises(
                TaskStateRefused, match="its failure is not recoverable: denied by the owner"
            ):
                await op.retry(asking.task_id)
            assert (await kernel.journal.tasks.get(asking.task_id)).state is TaskState.Failed

    asyncio.run(run())
    assert not effects.exists()


PIPELINE = """
    id = "twice"
    description = "A write, then a read of another service"
    allowed_tools = ["http.request"]
    [timeouts]
    step_seconds = 10
"""


def _plan(write_url: str, read_url: str) -> str:
    return f"""
[[responses]]
template = "twice"
phase = "plan"
[responses.json]
steps = [
  {{ tool = "http.request", args = {{ method = "POST", url = "{write_url}/post", body = "p" }} }},
  {{ tool = "http.request", args = {{ method = "GET", url = "{read_url}/check" }} }},
]

[[responses]]
template = "twice"
phase = "synthesize"
text = "both done"
"""


def test_a_pipeline_retried_after_a_failed_read_runs_that_read_again_and_not_its_write(
    tmp_path: Path,
) -> None:
    writes, reads = RecordingServer(), RecordingServer(fail_status=503)
    try:
        home = make_home(
            tmp_path / "home",
            templates={"twice": PIPELINE},
            script=_plan(writes.url, reads.url),
        )

        async def run() -> tuple[Failed, TaskState]:
            async with open_kernel(home) as kernel:
                op = Operator(kernel, OWNER)
                task = await op.submit("twice", "go")
                await kernel.wait_idle()
                failed = (await kernel.journal.tasks.get(task.task_id)).payload
                assert isinstance(failed, Failed)
                reads.fail_status = None  # the service is back
                retried = await op.retry(task.task_id)
                assert retried.state is TaskState.Executing
                await kernel.wait_idle()
                return failed, (await kernel.journal.tasks.get(task.task_id)).state

        failed, state = asyncio.run(run())
    finally:
        writes.close()
        reads.close()
    assert failed.recoverable and failed.then == Executing(current_step=1)  # the read
    assert state is TaskState.Completed
    assert [r["path"] for r in writes.requests] == ["/post"]  # the write ran once
    assert [r["path"] for r in reads.requests] == ["/check", "/check"]


def test_a_pipeline_whose_synthesis_failed_is_retried_there_its_steps_not_run_again(
    tmp_path: Path,
) -> None:
    server = RecordingServer()
    try:
        failing = _plan(server.url, server.url).replace(
            'text = "both done"', 'error = "the provider is overloaded"'
        )
        home = make_home(tmp_path / "home", templates={"twice": PIPELINE}, script=failing)

        async def run() -> tuple[Failed, TaskState, str | None]:
            async with open_kernel(home) as kernel:
                op = Operator(kernel, OWNER)
                task = await op.submit("twice", "go")
                await kernel.wait_idle()
                failed = (await kernel.journal.tasks.get(task.task_id)).payload
                assert isinstance(failed, Failed)
                script = home.root / "scripts" / "default.toml"
                script.write_text(_plan(server.url, server.url))
                await op.retry(task.task_id)
                await kernel.wait_idle()
                done = await kernel.journal.tasks.get(task.task_id)
                return failed, done.state, (done.execute_progress or {}).get("result")

        failed, state, result = asyncio.run(run())
    finally:
        server.close()
    assert failed.recoverable and failed.then == Synthesizing()
    assert (state, result) == (TaskState.Completed, "both done")
    assert [r["path"] for r in server.requests] == ["/post", "/check"]  # each step once


DRIFTING = """
    [[turns]]
    turn = 1
    text = "Writing."
    tool_calls = [{ name = "Write", input = { file_path = "a.txt", content = "hi" } }]

    [[turns]]
    turn = 2
    text = "Done."
"""


def test_a_task_failed_on_its_drift_question_is_retried_without_being_asked_again(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = '[loop]\ntools = ["Write"]\nalways_allow = ["Write"]\nmax_iterations = 1\n'
    home = make_home(tmp_path / "home", script=DRIFTING, config=config)

    async def run() -> tuple[Failed, TaskState, int]:
        async with open_kernel(home) as kernel:
            op = Operator(kernel, OWNER)
            task = await kernel.start_loop(LoopRequest("write a.txt", str(work), once=True))
            await kernel.wait_idle()
            (question,) = (await op.questions()).approvals
            assert question.action_type == "drift"
            await op.answer(question.approval_id, "fail")
            await kernel.wait_idle()
            failed = (await kernel.journal.tasks.get(task.task_id)).payload
            assert isinstance(failed, Failed)
            await op.retry(task.task_id)
            await kernel.wait_idle()
            asked = len((await op.questions(answered=True)).approvals)
            return failed, (await kernel.journal.tasks.get(task.task_id)).state, asked

    failed, state, asked = asyncio.run(run())
    assert failed.recoverable and failed.then == Executing(current_step=1)
    assert state is TaskState.Completed
    assert asked == 1  # the limits counted again from the retry: not asked a second time
    assert (work / "a.txt").read_text() == "hi"


def test_a_subtasks_failure_is_never_recoverable_and_its_retry_names_the_parent(
    tmp_path: Path,
) -> None:
    """The owner fails a subtask on its drift question (a "fail" that is recoverable for
    a task of its own): the parent is given the failure and goes on, so the subtask is
    Failed for good, and a retry of it is refused, naming the parent."""
    work = tmp_path / "work"
    work.mkdir()
    config = '[loop]\ntools = ["Write", "Task"]\nalways_allow = ["Write"]\nmax_iterations = 2\n'
    home = make_home(tmp_path / "home", config=config)

    def model(request: ChatRequest) -> ChatResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if "A subtask of" in request.system:  # writes on and on, until it is stopped
            write = {"file_path": "b.txt", "content": f"draft {turn}"}
            return reply(request, "", [ToolCall(f"w{turn}", "Write", write)])
        if turn == 0:
            task = {"description": "write b", "prompt": "Write b.txt."}
            return reply(request, "", [ToolCall("t1", "Task", task)])
        return reply(request, "The subtask said: " + request.messages[-1].tool_results[0].content)

    async def run() -> None:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel, OWNER)
            parent = await op.start_loop("delegate b.txt", str(work))
            await kernel.wait_idle()
            blocked = (await kernel.journal.tasks.get(parent.task_id)).payload
            assert isinstance(blocked, Blocked)
            child_id = blocked.child_task_id
            (question,) = (await op.questions()).approvals
            assert question.task_id == child_id and question.action_type == "drift"
            await op.answer(question.approval_id, "fail")
            await kernel.wait_idle()
            failed = (await kernel.journal.tasks.get(child_id)).payload
            assert isinstance(failed, Failed)
            assert not failed.recoverable and failed.then is None
            assert (await op.task(parent.task_id)).state is TaskState.WaitingForUser
            with pytest.raises(TaskStateRefused, match=f"it is a subtask of task {parent.task_id}"):
                await op.retry(child_id)
            assert (await op.task(child_id)).state is TaskState.Failed

    asyncio.run(run())
