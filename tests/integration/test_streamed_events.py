"""Streamed events from each real provider: the official SDK against a loopback server
speaking the provider's wire format. Text reaches the sink while the server still holds
the rest of the answer; stop reasons map; a retried attempt is marked void; thinking is
never streamed; the proxy streams the same events as an async iterator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pfar.llm.anthropic_provider import AnthropicProvider
from pfar.llm.events import (
    ChatEvent,
    Finished,
    Retrying,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
)
from pfar.llm.messages import ChatRequest, ChatResponse, Message, StopReason, ToolCall, ToolSchema
from pfar.llm.openai_provider import OpenAIProvider
from pfar.llm.proxy import CallRecord, ChatModel, InferenceProxy
from pfar.llm.retry import ProviderCallFailed, RetryPolicy

from .llm_servers import (
    Gate,
    ScriptedLLMServer,
    SSEReply,
    anthropic_error_reply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_thinking_block,
    anthropic_tool_use_block,
)
from .openai_server import Fail, OpenAIServer, Stream, chunk, text_stream, tool_piece, usage_chunk

KEY = "sk-test-streaming-0123456789"
POLICY = RetryPolicy(backoff=(0.0, 0.01, 0.02), overloaded_wait=0.01)
READ_FILE = ToolSchema(
    "read_file",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
CALL = ToolCall("call_1", "read_file", {"path": "notes.md"})


def ask(**kw: Any) -> ChatRequest:
    return ChatRequest(
        model="m-test", system="be brief", messages=(Message("user", "hello"),), **kw
    )


@dataclass
class Wire:
    """One provider's wire format, served on loopback: scripted answers and the client."""

    name: str
    server: ScriptedLLMServer | OpenAIServer

    def provider(self) -> ChatModel:
        if isinstance(self.server, ScriptedLLMServer):
            return AnthropicProvider(KEY, base_url=self.server.url, timeout=5.0, policy=POLICY)
        return OpenAIProvider(KEY, base_url=self.server.base_url, timeout=5.0, policy=POLICY)

    def text(self, *pieces: str, stop: str = "end_turn", gate: Gate | None = None) -> None:
        """An answer in text pieces; `gate` holds it after the first piece."""
        if isinstance(self.server, ScriptedLLMServer):
            events = anthropic_stream(anthropic_text_block(0, pieces), stop_reason=stop)
            if gate is not None:  # message_start, ping, block start, first delta
                gate.after = 4
            self.server.script(SSEReply(events, gate=gate))
        else:
            finish = {"end_turn": "stop", "max_tokens": "length"}[stop]
            chunks = text_stream(*pieces)
            chunks[-2] = chunk(finish=finish)
            if gate is not None:  # role, first piece
                gate.after = 2
            self.server.script(Stream(chunks, gate=gate))

    def tool_use(self, text: str, call: ToolCall) -> None:
        args = json.dumps(call.input)
        pieces = [args[:5], args[5:]]
        if isinstance(self.server, ScriptedLLMServer):
            self.server.script(
                SSEReply(
                    anthropic_stream(
                        anthropic_text_block(0, [text]),
                        anthropic_tool_use_block(1, call.id, call.name, pieces),
                        stop_reason="tool_use",
                    )
                )
            )
        else:
            self.server.script(
                Stream(
                    [
                        chunk(role="assistant", content=text),
                        chunk(tool_calls=[tool_piece(0, id=call.id, name=call.name)]),
                        *(chunk(tool_calls=[tool_piece(0, arguments=p)]) for p in pieces),
                        chunk(finish="tool_calls"),
                        usage_chunk(10, 5),
                    ]
                )
            )

    def cut_after_text(self, text: str) -> None:
        """An attempt that breaks off after some text: retried."""
        if isinstance(self.server, ScriptedLLMServer):
            events = anthropic_stream(anthropic_text_block(0, [text, " and much more"]))
            self.server.script(SSEReply(events, cut_after=4))
        else:
            self.server.script(Stream([chunk(role="assistant"), chunk(content=text)], cut=True))

    def bad_request(self) -> None:
        if isinstance(self.server, ScriptedLLMServer):
            self.server.script(anthropic_error_reply(400, "messages: field required"))
        else:
            self.server.script(Fail(400, "messages: field required"))


@pytest.fixture(params=["anthropic", "openai"])
def wire(request: pytest.FixtureRequest) -> Iterator[Wire]:
    if request.param == "anthropic":
        with ScriptedLLMServer() as server:
            yield Wire("anthropic", server)
    else:
        openai_server = OpenAIServer()
        try:
            yield Wire("openai", openai_server)
        finally:
            openai_server.close()


def streamed(
    wire: Wire, request: ChatRequest, gate: Gate | None = None
) -> tuple[ChatResponse, list[ChatEvent]]:
    events: list[ChatEvent] = []

    def sink(event: ChatEvent) -> None:
        events.append(event)
        if gate is not None and isinstance(event, TextDelta):
            gate.open()  # the rest of the answer is still held by the server

    async def go() -> ChatResponse:
        provider = wire.provider()
        try:
            return await provider.chat(request, on_event=sink)
        finally:
            if isinstance(provider, AnthropicProvider):
                await provider.aclose()

    return asyncio.run(go()), events


def kinds(events: list[ChatEvent]) -> list[str]:
    return [e.kind for e in events]


def test_text_deltas_arrive_while_the_rest_of_the_answer_is_still_held(wire: Wire) -> None:
    gate = Gate(after=0)
    wire.text("The answer ", "is ", "42.", gate=gate)
    response, events = streamed(wire, ask(), gate)
    assert not gate.timed_out  # the first delta reached the sink before the answer ended
    assert kinds(events) == ["text_delta"] * 3 + ["finished"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The answer is 42."
    assert events[-1] == Finished(response)
    assert response.stop_reason is StopReason.end_turn


@pytest.mark.parametrize("stop", [StopReason.end_turn, StopReason.max_tokens])
def test_a_text_answers_stop_reason_maps(wire: Wire, stop: StopReason) -> None:
    wire.text("Once upon ", "a time", stop=stop.value)
    response, events = streamed(wire, ask())
    assert response.stop_reason is stop
    assert response.text == "Once upon a time"
    final = events[-1]
    assert isinstance(final, Finished) and final.response.stop_reason is stop


def test_a_tool_call_streams_its_pieces_then_the_checked_call(wire: Wire) -> None:
    wire.tool_use("Let me look.", CALL)
    response, events = streamed(wire, ask(tools=(READ_FILE,)))
    assert response.stop_reason is StopReason.tool_use
    assert response.tool_calls == (CALL,)
    assert kinds(events)[0] == "text_delta"
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert json.loads("".join(p.input_json for p in pieces)) == CALL.input
    assert {(p.id, p.name) for p in pieces} == {(CALL.id, CALL.name)}
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert done == [ToolCallDone(CALL)]
    assert events.index(done[0]) > events.index(pieces[-1])
    assert events[-1] == Finished(response)


def test_a_retried_attempt_is_marked_void_before_the_next_streams(wire: Wire) -> None:
    wire.cut_after_text("The ans")
    wire.text("The answer is 42.")
    response, events = streamed(wire, ask(max_tokens=100))
    assert response.text == "The answer is 42."
    assert kinds(events) == ["text_delta", "retrying", "text_delta", "finished"]
    retry = events[1]
    assert isinstance(retry, Retrying)
    assert (retry.attempt, retry.reason, retry.wait) == (1, "stream_cut", 0.0)
    assert KEY not in retry.detail
    # what a viewer shows: the deltas since the last `Retrying`
    assert events[2] == TextDelta("The answer is 42.")


def test_a_failed_call_streams_no_finished_event(wire: Wire) -> None:
    wire.bad_request()
    events: list[ChatEvent] = []
    with pytest.raises(ProviderCallFailed, match="bad_request"):
        asyncio.run(wire.provider().chat(ask(), on_event=events.append))
    assert events == []


def test_thinking_is_never_streamed() -> None:
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_thinking_block(0, ["SECRET-PLAN: first ", "think hard"]),
                    anthropic_text_block(1, ["The answer ", "is 4."]),
                )
            )
        )
        response, events = streamed(Wire("anthropic", server), ask())
    # no delta carries the thinking; the whole answer keeps it apart from its text
    assert kinds(events) == ["text_delta", "text_delta", "finished"]
    assert "SECRET-PLAN" not in repr(events[:-1])
    assert response.text == "The answer is 4."
    assert [t.thinking for t in response.thinking] == ["SECRET-PLAN: first think hard"]


def test_the_proxy_streams_a_real_models_events_as_an_iterator_and_accounts_the_call(
    wire: Wire,
) -> None:
    wire.text("Hi ", "there.")
    wire.bad_request()
    calls: list[CallRecord] = []
    proxy = InferenceProxy({wire.name: wire.provider()}, default=wire.name, on_call=calls.append)

    async def main() -> tuple[list[ChatEvent], str]:
        got: list[ChatEvent] = []
        async with proxy.stream(ask(), task_id="t1") as events:
            async for event in events:
                got.append(event)
        with pytest.raises(ProviderCallFailed) as failed:
            async with proxy.stream(ask(), task_id="t2") as events:
                async for event in events:
                    got.append(event)  # never: the call fails before anything streams
        return got, str(failed.value)

    events, error = asyncio.run(main())
    assert kinds(events) == ["text_delta", "text_delta", "finished"]
    final = events[-1]
    assert isinstance(final, Finished) and final.response.text == "Hi there."
    assert "messages: field required" in error
    assert [c.task_id for c in calls] == ["t1"]  # a failed call is not accounted
