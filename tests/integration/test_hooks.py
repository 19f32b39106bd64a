"""Hooks through a real kernel (in this process, so a Python handler's record is the
test's): every point of the seed fires where the seed places it, each capability
changes what the task does, a failing, hanging or garbage-printing handler leaves the
kernel running, and a kept verdict is replayed instead of asked again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfar.config import Config
from pfar.hook_points import HookPoint
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.llm.messages import ToolCall
from pfar.vault.home import Home

from .. import hook_handlers
from ..support import make_home, wait_for_file

LESSON = "The bug was in config.rs line 42: the parser expects an array, not an object."


def _hooks(entries: dict[str, str] | list[tuple[str, str]], **extra: str) -> str:
    """`[[hooks]]` entries: point -> handler (a `tests.hook_handlers` name, or a shell
    command starting with "sh:")."""
    items = entries.items() if isinstance(entries, dict) else entries
    out = []
    for point, handler in items:
        out.append(f'[[hooks]]\npoint = "{point}"')
        if handler.startswith("sh:"):
            out.append(f"command = {json.dumps(handler[3:])}")
        else:
            out.append(f'python = "tests.hook_handlers:{handler}"')
        for key, value in extra.items():
            out.append(f"{key} = {value}")
    return "\n".join(out) + "\n"


def _home(tmp_path: Path, config: str) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "a.txt").write_text("alpha\n")
    home = make_home(tmp_path / "home", config=config, script='[[turns]]\ntext = "ok"\n')
    return home, work


def _calls(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


class Script:
    """Answers each task (by its prompt) from a list of turns; a turn is a text or a
    list of (tool, input) calls. Keeps every request."""

    def __init__(
        self, turns: dict[str, list[Any]], gates: dict[str, asyncio.Event] | None = None
    ) -> None:
        self.turns = turns
        self.requests: list[ChatRequest] = []
        self.gates = gates or {}  # a prompt's answers wait for its gate

    def __call__(self, request: ChatRequest) -> Any:
        prompt = request.messages[0].text
        gate = next((g for k, g in self.gates.items() if prompt.startswith(k)), None)
        if gate is not None:
            return self._after(gate, request)
        return self._answer(request)

    async def _after(self, gate: asyncio.Event, request: ChatRequest) -> ChatResponse:
        await gate.wait()
        return self._answer(request)

    def _answer(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        prompt = request.messages[0].text
        key = next((k for k in self.turns if prompt.startswith(k)), None)
        if key is None:  # a summary, or a prompt the test does not script
            return reply(request, "done")
        turns = self.turns[key]
        n = _calls(request)
        turn = turns[min(n, len(turns) - 1)]
        if isinstance(turn, str):
            return reply(request, turn.replace("$last", request.messages[-1].text or ""))
        calls = [ToolCall(f"c{n}-{i}", name, args) for i, (name, args) in enumerate(turn)]
        return reply(request, "Working on it.", calls)


def _said(request: ChatRequest) -> str:
    """Everything the model was shown: texts and tool results."""
    return json.dumps(
        [m.text for m in request.messages]
        + [r.content for m in request.messages for r in m.tool_results]
    )


async def _until(op: Operator, task_id: str, *states: TaskState) -> TaskState:
    for _ in range(500):
        await op.wait_idle()
        state = (await op.task(task_id)).state
        if state in states:
            return state
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} stayed {state}")


async def _pending(op: Operator, task_id: str) -> Any:
    (question,) = [
        a
        for a in (await op.questions()).approvals
        if a.task_id == task_id and a.status.value == "pending"
    ]
    return question


def _run(home: Home, model: Script, scenario: Callable[[Operator, Kernel], Any]) -> Any:
    async def go() -> Any:
        kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(model))
        await kernel.start()
        try:
            return await scenario(Operator(kernel), kernel)
        finally:
            await kernel.shutdown()

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _fresh_record() -> None:
    hook_handlers.FIRED.clear()


def test_every_hook_point_of_the_seed_fires(tmp_path: Path) -> None:
    config = (
        '[loop]\ntools = ["Read", "Write", "Bash", "Task"]\nalways_allow = ["Read"]\n'
        "[loop.anomaly]\nmax_writes_per_minute = 1\n"
        "[scheduler]\nmax_concurrent = 1\n" + _hooks({p.value: "record" for p in HookPoint})
    )
    home, work = _home(tmp_path, config)
    model = Script(
        {
            "Fix": [
                [
                    ("Read", {"file_path": "a.txt"}),
                    ("Write", {"file_path": "b.txt", "content": "beta"}),
                    ("Bash", {"command": "echo hi"}),
                    ("Bash", {"command": "rm -rf /"}),
                ],
                [("Task", {"prompt": "Check b.txt", "description": "check"})],
                f"Found it. {LESSON} Fixed by reading a list.",
                "You said: $last",
            ],
            "Check": ["b.txt holds beta."],
            "Second": ["Second done."],
            "Third": ["Waiting."],
            "Fifth": ["Fifth done."],
            "Sixth": ["Sixth done."],
        },
        gates={"Fifth": (fifth_may_answer := asyncio.Event())},
    )

    async def scenario(op: Operator, kernel: Kernel) -> None:
        first = (await op.start_loop("Fix the config loading bug", str(work))).task_id
        # the second waits for the only slot: scheduled when the first parks
        second = (await op.start_loop("Second thing", str(work), once=True)).task_id
        await op.pause(second)  # waiting for its slot: paused at once
        await _until(op, first, TaskState.AwaitingApproval)
        await op.answer((await _pending(op, first)).approval_id, "approve")  # Write
        await _until(op, first, TaskState.AwaitingApproval)
        await op.answer((await _pending(op, first)).approval_id, "deny")  # Bash
        await _until(op, first, TaskState.WaitingForUser)
        await op.send(first, "thanks")
        await _until(op, first, TaskState.WaitingForUser)
        await op.resume(second)
        await op.send(first, "/done")
        assert await _until(op, first, TaskState.Completed) is TaskState.Completed
        assert await _until(op, second, TaskState.Completed) is TaskState.Completed
        third = (await op.start_loop("Third thing", str(work))).task_id
        await _until(op, third, TaskState.WaitingForUser)
        await op.cancel(third)
        # a task that fails: its directory is gone before it starts
        gone = tmp_path / "gone"
        gone.mkdir()
        fourth = (await op.start_loop("Fourth thing", str(gone), once=True)).task_id
        await _until(op, fourth, TaskState.Completed, TaskState.Failed)
        # the fifth holds the only slot until the sixth is queued behind it: the sixth is
        # then scheduled when the fifth ends
        fifth = (await op.start_loop("Fifth thing", str(work), once=True)).task_id
        sixth = (await op.start_loop("Sixth thing", str(work), once=True)).task_id
        for _ in range(500):
            if (await op.task(sixth)).state is TaskState.Queued:
                break
            await asyncio.sleep(0.01)
        assert (await op.task(sixth)).state is TaskState.Queued
        fifth_may_answer.set()
        await _until(op, fifth, TaskState.Completed)
        await _until(op, sixth, TaskState.Completed)
        for _ in range(100):  # lifecycle hooks follow the bus
            if {"TaskCancelled", "TaskScheduled"} <= hook_handlers.points():
                break
            await asyncio.sleep(0.05)

    _run(home, model, scenario)
    fired = hook_handlers.points()
    fired |= _lock_wait(tmp_path)
    fired |= _failed(tmp_path)
    missing = [p.value for p in HookPoint if p.value not in fired]
    assert not missing, f"never fired: {missing}"


def _lock_wait(tmp_path: Path) -> set[str]:
    """Two tasks writing one file at once: the second waits for the first's lock (a
    PostToolUse handler holds the first's call until the wait was seen: a fixed 1 s
    could end before the second task reached its write on a loaded machine)."""
    gate = tmp_path / "locks-go"
    hold = f"sh:{wait_for_file(gate)}"
    config = '[loop]\ntools = ["Write"]\nalways_allow = ["Write"]\n' + _hooks(
        [("PostToolUse", hold), ("ResourceLockWait", "record")], timeout_seconds="60"
    )
    home, work = _home(tmp_path / "locks", config)
    model = Script(
        {
            "One": [[("Write", {"file_path": "same.txt", "content": "1"})], "ok"],
            "Two": [[("Write", {"file_path": "same.txt", "content": "2"})], "ok"],
        }
    )

    before = len(hook_handlers.FIRED)

    async def scenario(op: Operator, kernel: Kernel) -> None:
        one = (await op.start_loop("One", str(work), once=True)).task_id
        two = (await op.start_loop("Two", str(work), once=True)).task_id
        for _ in range(1000):  # the first write is held until the second waits for it
            if any(e["hook"] == "ResourceLockWait" for e in hook_handlers.FIRED[before:]):
                break
            await asyncio.sleep(0.02)
        gate.touch()
        await _until(op, one, TaskState.Completed)
        await _until(op, two, TaskState.Completed)

    _run(home, model, scenario)
    waits = [e for e in hook_handlers.FIRED[before:] if e["hook"] == "ResourceLockWait"]
    assert waits and waits[0]["resource"]["kind"] == "file"
    return {"ResourceLockWait"}


def _failed(tmp_path: Path) -> set[str]:
    """A task stopped by its PreContextAssembly hook fails, and TaskFailed fires."""
    config = '[loop]\ntools = ["Read"]\n' + _hooks(
        [("PreContextAssembly", "block"), ("TaskFailed", "record")]
    )
    home, work = _home(tmp_path / "fails", config)

    async def scenario(op: Operator, kernel: Kernel) -> str:
        tid = (await op.start_loop("Anything", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Failed)
        for _ in range(100):
            if "TaskFailed" in hook_handlers.points():
                break
            await asyncio.sleep(0.05)
        return (await op.task(tid)).error or ""

    error = _run(home, Script({}), scenario)
    assert "blocked by the PreContextAssembly hook tests.hook_handlers:block: not today" in error
    return {"TaskFailed"} & hook_handlers.points()


def test_pre_tool_use_modifies_a_call_and_the_step_keeps_what_ran(tmp_path: Path) -> None:
    rewrite = json.dumps({"modify": {"input": {"command": "echo rewritten > out.txt"}}})
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n' + _hooks(
        {"PreToolUse": f"sh:echo '{rewrite}'"}
    )
    home, work = _home(tmp_path, config)
    model = Script({"Do": [[("Bash", {"command": "echo original > out.txt"})], "$last"]})

    async def scenario(op: Operator, kernel: Kernel) -> Any:
        tid = (await op.start_loop("Do it", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)
        return await kernel.journal.tasks.steps(tid)

    (step,) = _run(home, model, scenario)
    assert (work / "out.txt").read_text() == "rewritten\n"
    assert step.args == {"command": "echo rewritten > out.txt"}


def test_pre_tool_use_blocks_a_call_and_the_model_is_told(tmp_path: Path) -> None:
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n' + _hooks(
        {"PreToolUse": "sh:echo 'no commands today' >&2; exit 2"}
    )
    home, work = _home(tmp_path, config)
    model = Script({"Do": [[("Bash", {"command": "touch made.txt"})], "$last"]})

    async def scenario(op: Operator, kernel: Kernel) -> None:
        tid = (await op.start_loop("Do it", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)

    _run(home, model, scenario)
    assert not (work / "made.txt").exists()
    told = _said(model.requests[-1])
    assert "did not run: blocked by the PreToolUse hook" in told and "no commands today" in told


def test_context_request_and_answer_hooks_change_what_the_model_gets(tmp_path: Path) -> None:
    config = '[loop]\ntools = ["Read"]\n' + _hooks(
        {
            "PreContextAssembly": "inject",
            "PostContextAssembly": "shorter_system",
            "PreLLMCall": "other_model",
            "PostLLMCall": "upper_text",
        }
    )
    home, work = _home(tmp_path, config)
    model = Script({"Say": ["quiet words"]})

    async def scenario(op: Operator, kernel: Kernel) -> str:
        tid = (await op.start_loop("Say something", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)
        return str((await kernel.journal.tasks.get(tid)).execute_progress.get("result"))

    result = _run(home, model, scenario)
    (request,) = model.requests
    assert request.system.startswith("You are terse. ")
    assert "From the owner's hooks:\nThe staging database is read-only today." in request.system
    assert request.model == "hooked-model"
    assert result == "QUIET WORDS"


def test_a_permission_hook_grants_or_denies_without_asking(tmp_path: Path) -> None:
    for handler, made in (("allow", True), ("block", False)):
        hook_handlers.FIRED.clear()
        config = '[loop]\ntools = ["Bash"]\nalways_allow = []\n' + _hooks(
            {
                "PermissionRequest": handler,
                "PermissionGranted": "record",
                "PermissionDenied": "record",
            }
        )
        home, work = _home(tmp_path / handler, config)
        model = Script({"Do": [[("Bash", {"command": "touch made.txt"})], "$last"]})

        async def scenario(op: Operator, kernel: Kernel, work: Path = work) -> Any:
            tid = (await op.start_loop("Do it", str(work), once=True)).task_id
            await _until(op, tid, TaskState.Completed)
            return (await op.questions(answered=True)).approvals

        assert _run(home, model, scenario) == ()  # the owner was never asked
        assert (work / "made.txt").exists() is made
        expect = "PermissionGranted" if made else "PermissionDenied"
        assert expect in hook_handlers.points()


def test_a_security_policy_hook_overrules_the_policy_or_adds_a_check(tmp_path: Path) -> None:
    config = '[loop]\ntools = ["Read"]\n[loop.policy]\nprotected_paths = ["secret.txt"]\n' + _hooks(
        {"SecurityPolicyCheck": "allow", "SecurityViolation": "record"}, tools='["Read"]'
    )
    home, work = _home(tmp_path, config)
    (work / "secret.txt").write_text("the recipe\n")
    model = Script({"Read": [[("Read", {"file_path": "secret.txt"})], "ok"]})

    async def scenario(op: Operator, kernel: Kernel) -> None:
        tid = (await op.start_loop("Read the secret", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)

    _run(home, model, scenario)
    assert "the recipe" in _said(model.requests[-1])
    assert "SecurityViolation" not in hook_handlers.points()

    config = '[loop]\ntools = ["Read"]\n' + _hooks(
        {"SecurityPolicyCheck": "block", "SecurityViolation": "record"}
    )
    home, work = _home(tmp_path / "second", config)
    model = Script({"Read": [[("Read", {"file_path": "a.txt"})], "ok"]})
    _run(home, model, scenario)
    assert "alpha" not in _said(model.requests[-1])
    assert "not today" in _said(model.requests[-1])
    (violation,) = [e for e in hook_handlers.FIRED if e["hook"] == "SecurityViolation"]
    assert violation["tool"] == "Read" and "not today" in violation["reason"]


def test_post_tool_use_transforms_the_result_the_step_keeps(tmp_path: Path) -> None:
    config = '[loop]\ntools = ["Read"]\n' + _hooks({"PostToolUse": "wrap_result"})
    home, work = _home(tmp_path, config)
    model = Script({"Read": [[("Read", {"file_path": "a.txt"})], "$last"]})

    async def scenario(op: Operator, kernel: Kernel) -> Any:
        tid = (await op.start_loop("Read it", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)
        return await kernel.journal.tasks.steps(tid)

    (step,) = _run(home, model, scenario)
    assert step.result["text"].startswith("[seen by the hook] ")


def test_post_user_input_changes_or_refuses_the_owners_message(tmp_path: Path) -> None:
    from pfar.errors import BadRequest

    config = '[loop]\ntools = ["Read"]\n' + _hooks({"PostUserInput": "upper_text"})
    home, work = _home(tmp_path, config)
    model = Script({"Talk": ["Hello.", "You said: $last"]})

    async def scenario(op: Operator, kernel: Kernel) -> None:
        tid = (await op.start_loop("Talk to me", str(work))).task_id
        await _until(op, tid, TaskState.WaitingForUser)
        await op.send(tid, "quiet please")
        await _until(op, tid, TaskState.WaitingForUser)

    _run(home, model, scenario)
    assert model.requests[-1].messages[-1].text == "QUIET PLEASE"

    config = '[loop]\ntools = ["Read"]\n' + _hooks({"PostUserInput": "block"})
    home, work = _home(tmp_path / "refused", config)
    model = Script({"Talk": ["Hello.", "You said: $last"]})

    async def refused(op: Operator, kernel: Kernel) -> None:
        tid = (await op.start_loop("Talk to me", str(work))).task_id
        await _until(op, tid, TaskState.WaitingForUser)
        with pytest.raises(BadRequest, match=r"was refused: .*not today"):
            await op.send(tid, "anything")
        assert (await op.task(tid)).state is TaskState.WaitingForUser  # nothing kept

    _run(home, model, refused)


def test_knowledge_and_learning_hooks(tmp_path: Path) -> None:
    config = '[loop]\ntools = ["Read"]\n' + _hooks(
        {
            "LearningExtracted": "tag_learning",
            "KnowledgeQuery": "record",
            "KnowledgeInjected": "only_first_learning",
        }
    )
    home, work = _home(tmp_path, config)
    model = Script({"Find": [f"Found it. {LESSON}"], "Fix": ["Fixed."]})

    async def scenario(op: Operator, kernel: Kernel) -> Any:
        for prompt in ("Find why config loading fails", "Fix the config loading bug"):
            tid = (await op.start_loop(prompt, str(work), once=True)).task_id
            await _until(op, tid, TaskState.Completed)
        return await op.learnings()

    learnings = _run(home, model, scenario)
    assert learnings and all(x.content.startswith("[checked] ") for x in learnings)
    assert all(x.tags == ("checked",) for x in learnings)
    later = model.requests[-1].system
    assert "- Always run the linter first (from the hook)" in later
    assert "[checked]" not in later  # the KnowledgeInjected hook chose what is shown
    queries = [e for e in hook_handlers.FIRED if e["hook"] == "KnowledgeQuery"]
    assert [q["query"] for q in queries][-1] == "Fix the config loading bug"

    config = '[loop]\ntools = ["Read"]\n' + _hooks({"LearningExtracted": "block"})
    home, work = _home(tmp_path / "none", config)
    assert _run(home, Script({"Find": [f"Found it. {LESSON}"]}), scenario) == []


@pytest.mark.parametrize(
    "handler", ["crash", "garbage", "hang", "sh:exit 7", "sh:echo nonsense", "sh:sleep 30"]
)
def test_a_bad_handler_never_stops_the_kernel(tmp_path: Path, handler: str) -> None:
    """At observe points the task goes on; at PreToolUse (a security point) the call is
    blocked, the model and the owner are told, and the task goes on."""
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n' + _hooks(
        [(p, handler) for p in ("LoopIteration", "PostLLMCall", "TaskCompleted", "PreToolUse")],
        timeout_seconds="0.5",
    )
    home, work = _home(tmp_path, config)
    model = Script({"Do": [[("Bash", {"command": "touch made.txt"})], "$last"]})

    async def scenario(op: Operator, kernel: Kernel) -> Any:
        tid = (await op.start_loop("Do it", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)
        later = (await op.start_loop("Do it again", str(work), once=True)).task_id
        await _until(op, later, TaskState.Completed)
        return tid

    _run(home, model, scenario)
    assert not (work / "made.txt").exists()
    told = _said(model.requests[1])
    assert "failed security hook" in told
    log = home.owner_log.read_text()
    assert "pfar blocks what a failed security hook was asked about" in log
    assert "Fix or remove the hook" in log


def test_a_kept_verdict_is_replayed_not_asked_again(tmp_path: Path) -> None:
    """The verdict a PreToolUse handler gave is kept with the step: asked again about the
    same step (a resumed task), the kernel replays it without calling the handler."""
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n' + _hooks(
        {"PreToolUse": "record"}
    )
    home, work = _home(tmp_path, config)
    model = Script({"Do": [[("Bash", {"command": "true"})], "$last"]})

    async def scenario(op: Operator, kernel: Kernel) -> Any:
        tid = (await op.start_loop("Do it", str(work), once=True)).task_id
        await _until(op, tid, TaskState.Completed)
        from pfar.runners import hooking

        hook_handlers.FIRED.clear()
        again = await hooking.decide(
            kernel.services, tid, "t", HookPoint.PreToolUse, "step:0", {"tool": "Bash"}
        )
        return tid, again, await kernel.journal.tasks.hook_verdict(tid, "PreToolUse:step:0")

    _, again, kept = _run(home, model, scenario)
    assert hook_handlers.FIRED == []
    assert kept is not None and again.blocked is None and not again.changed
