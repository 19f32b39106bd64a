"""Multi-turn, tool-using conversations driven by the scripted chat model through the
inference proxy: real pfar tools run the calls in a real workspace, every call is
accounted, events stream, and a request made again gets the same answer."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from pfar.errors import ProviderError, ToolError
from pfar.llm import (
    ChatEvent,
    ChatRequest,
    ChatResponse,
    InferenceProxy,
    Message,
    ScriptedChatModel,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallDone,
    ToolResult,
    reply,
)
from pfar.llm.proxy import CallRecord
from pfar.llm.script_file import load_scripted_model
from pfar.runners.thinking import tool_schemas
from pfar.tools.base import ToolContext
from pfar.tools.registry import ToolRegistry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scripts.md"
TOOLS = ToolRegistry.builtin()


class Runner:
    """A runner's part of the conversation: send the conversation through the proxy, run
    the tool calls with pfar's own tools, answer with their results, until the model
    stops calling tools."""

    def __init__(self, proxy: InferenceProxy, workspace: Path) -> None:
        self.proxy, self.workspace = proxy, workspace
        self.requests: list[ChatRequest] = []
        self.events: list[ChatEvent] = []

    async def converse(self, text: str, *, turns: int = 10) -> list[Message]:
        messages = [Message("user", text)]
        for _ in range(turns):
            request = ChatRequest(
                model="scripted",
                system="You keep notes.",
                messages=tuple(messages),
                tools=tuple(tool_schemas(TOOLS).values()),
            )
            self.requests.append(request)
            answer = await self.proxy.chat(request, task_id="t1", on_event=self.events.append)
            messages.append(Message("assistant", answer.text, tool_calls=answer.tool_calls))
            if answer.stop_reason is not StopReason.tool_use:
                return messages
            results = [await self.run(call, len(messages)) for call in answer.tool_calls]
            messages.append(Message("user", tool_results=tuple(results)))
        raise AssertionError("the conversation did not end")

    async def run(self, call: ToolCall, step: int) -> ToolResult:
        tool = TOOLS.get(call.name)
        ctx = ToolContext("t1", step, f"t1:{step}", self.workspace, lambda _: None)
        try:
            tool.validate(call.input)
            result = await tool.run(call.input, ctx)
        except ToolError as exc:
            return ToolResult(call.id, f"Error: {exc}", is_error=True)
        return ToolResult(call.id, json.dumps(result, sort_keys=True))


def write_script(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body))
    os.chmod(path, 0o600)
    return path


NOTES = """
    [[turns]]
    turn = 1
    match = "(?i)remember"
    text = "Noting it."
    tool_calls = [{ name = "file.write", input = { path = "note.md", content = "$input" } }]

    [[turns]]
    last = "^Error"
    text = "Sorry: $last"

    [[turns]]
    after_tool = "file.write"
    tool_calls = [{ name = "file.read", input = { path = "note.md" } }]
    input_tokens = 40
    output_tokens = 8

    [[turns]]
    after_tool = "file.read"
    text = "Saved. It reads: $last"
"""


def test_a_turns_file_drives_a_tool_using_conversation_through_the_proxy(
    tmp_path: Path,
) -> None:
    calls: list[CallRecord] = []
    model = load_scripted_model(write_script(tmp_path / "turns.toml", NOTES))
    proxy = InferenceProxy(
        {"scripted": model}, default="scripted", local="scripted", on_call=calls.append
    )
    runner = Runner(proxy, tmp_path)
    messages = asyncio.run(runner.converse("remember the milk"))

    assert (tmp_path / "note.md").read_text() == "remember the milk"  # the tool really ran
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1].tool_calls == (
        ToolCall("call_1_1", "file.write", {"path": "note.md", "content": "remember the milk"}),
    )
    assert messages[3].tool_calls == (ToolCall("call_2_1", "file.read", {"path": "note.md"}),)
    final = messages[-1].text
    assert final.startswith("Saved. It reads: ") and '"content": "remember the milk"' in final
    # every call went through the proxy and was accounted, with the script's usage
    assert [(c.task_id, c.provider) for c in calls] == [("t1", "scripted")] * 3
    assert (calls[1].input_tokens, calls[1].output_tokens) == (40, 8)
    # the streamed events: each answer's text, its calls, then the whole answer
    assert [e.kind for e in runner.events] == [
        "text_delta",
        "tool_call_done",
        "finished",
        "tool_call_done",
        "finished",
        "text_delta",
        "finished",
    ]
    # a request made again (a crash before its answer was kept) gets the same answer
    again = [asyncio.run(proxy.chat(r, task_id="t1")) for r in runner.requests]
    assert [(a.text, a.tool_calls) for a in again] == [
        (m.text, m.tool_calls) for m in messages[1::2]
    ]


def test_a_refused_tool_call_gets_the_turn_that_matches_its_error(tmp_path: Path) -> None:
    script = NOTES.replace('path = "note.md", content', 'path = "../outside.md", content')
    model = load_scripted_model(write_script(tmp_path / "turns.toml", script))
    proxy = InferenceProxy({"scripted": model}, default="scripted")
    messages = asyncio.run(Runner(proxy, tmp_path / "ws").converse("remember the milk"))
    assert len(messages) == 4
    assert messages[2].tool_results[0].is_error
    assert messages[-1].text.startswith("Sorry: Error: ")
    assert not (tmp_path / "outside.md").exists()


def test_a_conversation_no_turn_answers_fails_naming_the_file_and_turn(tmp_path: Path) -> None:
    path = write_script(tmp_path / "turns.toml", NOTES)
    proxy = InferenceProxy({"scripted": load_scripted_model(path)}, default="scripted")
    with pytest.raises(ProviderError) as failed:
        asyncio.run(Runner(proxy, tmp_path).converse("what time is it?"))
    assert str(path) in str(failed.value)
    assert "no turn for model turn 1" in str(failed.value)


def test_a_python_handler_answers_from_the_last_tool_result(tmp_path: Path) -> None:
    """The handler is a plain function of the conversation, like httpx's MockTransport."""

    def handler(request: ChatRequest) -> ChatResponse:
        last = request.messages[-1]
        if not last.tool_results:  # the owner spoke: write each word to its own file
            words = request.messages[0].text.split()
            calls = [
                ToolCall(f"w{i}", "file.write", {"path": f"{w}.txt", "content": w})
                for i, w in enumerate(words)
            ]
            return reply(request, "Writing.", calls)
        wrote = [json.loads(r.content)["path"] for r in last.tool_results]
        return reply(request, f"Wrote {', '.join(wrote)}.", stop_reason=StopReason.end_turn)

    proxy = InferenceProxy({"scripted": ScriptedChatModel(handler)}, default="scripted")
    runner = Runner(proxy, tmp_path)
    messages = asyncio.run(runner.converse("eggs flour"))
    assert messages[-1].text == "Wrote eggs.txt, flour.txt."
    assert (tmp_path / "flour.txt").read_text() == "flour"
    done = [e.call.name for e in runner.events if isinstance(e, ToolCallDone)]
    assert done == ["file.write", "file.write"]

    async def stream_first() -> list[str]:
        texts = []
        async with proxy.stream(runner.requests[0], task_id="t1") as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
        return texts

    assert asyncio.run(stream_first()) == ["Writing."]


def test_a_scripted_answer_is_bounded_by_the_attempt_timeout() -> None:
    async def slow(request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(10)
        return reply(request, "late")

    proxy = InferenceProxy({"scripted": ScriptedChatModel(slow)}, default="scripted")
    request = ChatRequest("m", "", (Message("user", "hi"),), attempt_timeout=0.05)
    with pytest.raises(ProviderError, match=r"no answer within 0.05s"):
        asyncio.run(proxy.chat(request, task_id="t1"))


def test_the_docs_conversation_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = DOCS.read_text().split("## Conversations", 1)[1].split("\n## ", 1)[0]
    script, program, printed = re.findall(r"```(?:toml|python|)\n(.*?)```", section, re.S)
    write_script(tmp_path / "turns.toml", script)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, str(DOCS), "exec"), {"__name__": "docs_example"})
    assert out.getvalue() == printed
