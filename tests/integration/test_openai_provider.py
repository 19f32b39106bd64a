"""OpenAIProvider against a real loopback server speaking the chat-completions wire format.

The official SDK is the client; nothing is mocked. Waits go to a recording sleep.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from pfar.llm.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
)
from pfar.llm.openai_provider import OpenAIProvider, validate
from pfar.llm.retry import ErrorKind, ProviderCallFailed, RetryPolicy

from .openai_server import (
    MODEL,
    Fail,
    OpenAIServer,
    Stream,
    chunk,
    text_stream,
    tool_piece,
    usage_chunk,
)

API_KEY = "sk-test-VERY-SECRET-0123456789abcdef"
POLICY = RetryPolicy(backoff=(0, 0.01, 0.02), overloaded_wait=0.03)

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather in a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["city"],
    },
)
CLOCK = ToolSchema(
    name="get_time",
    description="Current time in a timezone",
    input_schema={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer()
    yield srv
    srv.close()


class Harness:
    def __init__(self, server: OpenAIServer, *, timeout: float = 5.0) -> None:
        self.waits: list[float] = []
        self.provider = OpenAIProvider(
            API_KEY, base_url=server.base_url, timeout=timeout, policy=POLICY, sleep=self._sleep
        )

    async def _sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def chat(self, request: ChatRequest) -> ChatResponse:
        return asyncio.run(self.provider.chat(request))

    def fail(self, request: ChatRequest) -> ProviderCallFailed:
        with pytest.raises(ProviderCallFailed) as info:
            self.chat(request)
        assert API_KEY not in str(info.value)
        assert API_KEY not in "".join(traceback.format_exception(info.value))
        return info.value


def ask(text: str = "hi", **kw: Any) -> ChatRequest:
    return ChatRequest(
        model=MODEL,
        system="You are terse.",
        messages=(Message(role="user", text=text),),
        tools=(WEATHER, CLOCK),
        max_tokens=256,
        **kw,
    )


def tool_stream(*pieces: dict[str, Any], finish: str = "tool_calls") -> list[dict[str, Any]]:
    return [
        chunk(role="assistant"),
        *(chunk(tool_calls=[p]) for p in pieces),
        chunk(finish=finish),
        usage_chunk(20, 12),
    ]


# ---------------------------------------------------------------- answers


def test_text_answer_with_usage(server: OpenAIServer) -> None:
    server.script(Stream(text_stream("Hel", "lo, ", "world.", usage=(11, 4))))
    h = Harness(server)
    resp = h.chat(ask())
    assert resp.text == "Hello, world."
    assert resp.stop_reason is StopReason.end_turn
    assert resp.usage == Usage(input_tokens=11, output_tokens=4)
    assert resp.model == MODEL
    assert resp.tool_calls == () and resp.invalid_tool_calls == ()
    assert resp.time_to_first_token is not None
    assert 0 <= resp.time_to_first_token <= resp.total_time
    assert h.waits == []


def test_length_maps_to_max_tokens(server: OpenAIServer) -> None:
    chunks = [chunk(role="assistant"), chunk(content="abc"), chunk(finish="length")]
    server.script(Stream(chunks))
    resp = Harness(server).chat(ask())
    assert resp.stop_reason is StopReason.max_tokens
    assert resp.text == "abc"


def test_tool_call_arguments_in_pieces(server: OpenAIServer) -> None:
    server.script(
        Stream(
            tool_stream(
                tool_piece(0, id="call_a", name="get_weather", arguments=""),
                tool_piece(0, arguments='{"ci'),
                tool_piece(0, arguments='ty": "Os'),
                tool_piece(0, arguments='lo", "days": [1, '),
                tool_piece(0, arguments="2]}"),
            )
        )
    )
    resp = Harness(server).chat(ask())
    assert resp.stop_reason is StopReason.tool_use
    assert resp.tool_calls == (
        ToolCall(id="call_a", name="get_weather", input={"city": "Oslo", "days": [1, 2]}),
    )
    assert resp.invalid_tool_calls == ()
    assert resp.usage == Usage(20, 12)


def test_two_parallel_tool_calls(server: OpenAIServer) -> None:
    server.script(
        Stream(
            tool_stream(
                tool_piece(0, id="call_a", name="get_weather", arguments='{"city":'),
                tool_piece(1, id="call_b", name="get_time", arguments='{"tz": "Europe/'),
                tool_piece(0, arguments=' "Paris"}'),
                tool_piece(1, arguments='Paris"}'),
            )
        )
    )
    resp = Harness(server).chat(ask())
    assert resp.tool_calls == (
        ToolCall(id="call_a", name="get_weather", input={"city": "Paris"}),
        ToolCall(id="call_b", name="get_time", input={"tz": "Europe/Paris"}),
    )


# ---------------------------------------------------------------- bad tool calls


def test_malformed_tool_json_is_an_error_result(server: OpenAIServer) -> None:
    server.script(
        Stream(tool_stream(tool_piece(0, id="call_x", name="get_weather", arguments='{"city": ')))
    )
    resp = Harness(server).chat(ask())
    assert resp.tool_calls == ()
    (bad,) = resp.invalid_tool_calls
    assert bad.tool_call_id == "call_x" and bad.is_error
    assert "not valid JSON" in bad.content and "get_weather" in bad.content
    assert resp.stop_reason is StopReason.tool_use


def test_unknown_tool_is_an_error_result(server: OpenAIServer) -> None:
    server.script(
        Stream(
            tool_stream(
                tool_piece(0, id="call_1", name="launch_rockets", arguments="{}"),
                tool_piece(1, id="call_2", name="get_time", arguments='{"tz": "UTC"}'),
            )
        )
    )
    resp = Harness(server).chat(ask())
    assert resp.tool_calls == (ToolCall("call_2", "get_time", {"tz": "UTC"}),)
    (bad,) = resp.invalid_tool_calls
    assert bad.tool_call_id == "call_1" and bad.is_error
    assert "unknown tool 'launch_rockets'" in bad.content
    assert "get_time" in bad.content and "get_weather" in bad.content


def test_schema_mismatch_is_an_error_result(server: OpenAIServer) -> None:
    server.script(
        Stream(
            tool_stream(
                tool_piece(0, id="c1", name="get_weather", arguments='{"city": 5}'),
                tool_piece(1, id="c2", name="get_weather", arguments='{"unit": "k"}'),
                tool_piece(
                    2, id="c3", name="get_weather", arguments='{"city": "a", "days": ["x"]}'
                ),
                tool_piece(3, id="c4", name="get_weather", arguments='["Oslo"]'),
            )
        )
    )
    resp = Harness(server).chat(ask())
    assert resp.tool_calls == ()
    errors = {r.tool_call_id: r.content for r in resp.invalid_tool_calls}
    assert all(r.is_error for r in resp.invalid_tool_calls)
    assert "$.city should be string, not number" in errors["c1"]
    assert "is missing the required property 'city'" in errors["c2"]
    assert '$.unit should be one of "c", "f", not "k"' in errors["c2"]
    assert "$.days[0] should be integer, not string" in errors["c3"]
    assert "must be a JSON object" in errors["c4"]


def test_validator_subset() -> None:
    schema = {"type": ["string", "null"], "enum": ["a", None]}
    assert validate(None, schema) == []
    assert validate("a", schema) == []
    assert validate("b", schema) == ['$ should be one of "a", null, not "b"']
    assert validate(True, {"type": "integer"}) == ["$ should be integer, not boolean"]
    assert validate(2.0, {"type": "integer"}) == []
    assert validate(1.5, {"type": "number"}) == []
    assert validate({"x": {"y": 1}}, {"properties": {"x": {"required": ["z"]}}}) == [
        "$.x is missing the required property 'z'"
    ]


# ---------------------------------------------------------------- local servers


def test_local_server_flavour(server: OpenAIServer) -> None:
    """No usage chunk, no tool call ids, and "stop" although tools were called."""
    chunks = [
        chunk(role="assistant", content="Checking. "),
        chunk(tool_calls=[tool_piece(0, name="get_weather", arguments='{"city": "Rome"}')]),
        chunk(tool_calls=[tool_piece(1, name="get_time", arguments='{"tz": "CET"}')]),
        chunk(finish="stop"),
    ]
    server.script(Stream(chunks))
    provider = OpenAIProvider("x", base_url=server.base_url, timeout=5.0, policy=POLICY)
    resp = asyncio.run(provider.chat(ask()))
    assert resp.text == "Checking. "
    assert resp.usage == Usage(0, 0)
    assert resp.stop_reason is StopReason.tool_use
    assert [(c.name, c.input) for c in resp.tool_calls] == [
        ("get_weather", {"city": "Rome"}),
        ("get_time", {"tz": "CET"}),
    ]
    ids = [c.id for c in resp.tool_calls]
    assert all(ids) and len(set(ids)) == 2
    # compatible servers get max_tokens; OpenAI itself would get max_completion_tokens
    body = server.received[0].body
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert server.received[0].headers["authorization"] == "Bearer x"


def test_empty_api_key_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        OpenAIProvider("", base_url=None, timeout=1.0, policy=POLICY)


# ---------------------------------------------------------------- request shape


def test_request_shape(server: OpenAIServer) -> None:
    server.script(Stream(text_stream("ok")))
    request = ChatRequest(
        model=MODEL,
        system="Be exact.",
        messages=(
            Message(role="user", text="weather in Oslo and the time?"),
            Message(
                role="assistant",
                text="Let me look.",
                tool_calls=(
                    ToolCall("call_1", "get_weather", {"city": "Oslo"}),
                    ToolCall("call_2", "get_time", {"tz": "Europe/Oslo"}),
                ),
            ),
            Message(
                role="user",
                tool_results=(
                    ToolResult("call_1", "3 C, rain"),
                    ToolResult("call_2", "no such zone", is_error=True),
                ),
            ),
            Message(
                role="assistant",
                tool_calls=(ToolCall("call_3", "get_time", {"tz": "CET"}),),
            ),
            Message(
                role="user",
                text="thanks",
                tool_results=(
                    ToolResult("call_3", "12:00"),
                    ToolResult("call_9", "unknown tool 'x'", is_error=True),
                ),
            ),
        ),
        tools=(WEATHER, CLOCK),
        max_tokens=100,
        temperature=0.2,
        tool_choice="get_weather",
    )
    Harness(server).chat(request)
    (got,) = server.received
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == f"Bearer {API_KEY}"
    body = got.body
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 100
    assert body["temperature"] == 0.2
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": WEATHER.input_schema,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "Current time in a timezone",
                "parameters": CLOCK.input_schema,
            },
        },
    ]
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": "Be exact."}
    assert msgs[1] == {"role": "user", "content": "weather in Oslo and the time?"}
    assert msgs[2]["role"] == "assistant" and msgs[2]["content"] == "Let me look."
    assert [
        (c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in msgs[2]["tool_calls"]
    ] == [
        ("call_1", "function", "get_weather", {"city": "Oslo"}),
        ("call_2", "function", "get_time", {"tz": "Europe/Oslo"}),
    ]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_1", "content": "3 C, rain"}
    assert msgs[4] == {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such zone"}
    assert msgs[5]["role"] == "assistant" and msgs[5]["content"] is None
    assert msgs[6] == {"role": "tool", "tool_call_id": "call_3", "content": "12:00"}
    # a result for a call the assistant turn does not list travels as user text
    assert msgs[7] == {
        "role": "user",
        "content": "[tool call call_9] Error: unknown tool 'x'\n\nthanks",
    }
    assert len(msgs) == 8


def test_thinking_is_never_sent_to_an_openai_compatible_server(server: OpenAIServer) -> None:
    """Extended thinking is Anthropic's: its budget and an answer's thinking blocks are
    not sent (the API would refuse them, and a reasoning model's effort is another knob)."""
    server.script(Stream(text_stream("ok")))
    kept = (ThinkingBlock("thinking", thinking="PRIVATE-PLAN", signature="c2ln"),)
    request = ChatRequest(
        model=MODEL,
        system="",
        messages=(
            Message(role="user", text="hi"),
            Message(role="assistant", text="Hello.", thinking=kept),
            Message(role="user", text="again"),
        ),
        thinking_budget=2048,
    )
    Harness(server).chat(request)
    (got,) = server.received
    assert "PRIVATE-PLAN" not in json.dumps(got.body)
    assert not {"thinking", "reasoning_effort"} & set(got.body)
    assert got.body["messages"][1] == {"role": "assistant", "content": "Hello."}


# ---------------------------------------------------------------- error table


def test_429_waits_retry_after_then_succeeds(server: OpenAIServer) -> None:
    server.script(
        Fail(429, "Rate limit reached", type="requests", headers={"retry-after": "7"}),
        Stream(text_stream("done")),
    )
    h = Harness(server)
    assert h.chat(ask()).text == "done"
    assert h.waits == [7.0]
    assert len(server.received) == 2


def test_429_without_retry_after_uses_backoff(server: OpenAIServer) -> None:
    server.script(Fail(429, "slow down", type="requests"), Stream(text_stream("done")))
    h = Harness(server)
    assert h.chat(ask()).text == "done"
    assert h.waits == [0]


def test_500_retries_with_backoff_then_succeeds(server: OpenAIServer) -> None:
    server.script(
        Fail(500, "boom", type="server_error"),
        Fail(502, "bad gateway", type="server_error"),
        Stream(text_stream("fine")),
    )
    h = Harness(server)
    assert h.chat(ask()).text == "fine"
    assert h.waits == [0, 0.01]


@pytest.mark.parametrize(
    "fail",
    [
        Fail(529, "Overloaded", type="overloaded_error"),
        Fail(503, "The engine is currently overloaded, please try again later", "server_error"),
    ],
)
def test_overloaded_waits_then_succeeds(server: OpenAIServer, fail: Fail) -> None:
    server.script(fail, Stream(text_stream("phew")))
    h = Harness(server)
    assert h.chat(ask()).text == "phew"
    assert h.waits == [0.03]


def test_400_fails_at_once_with_the_servers_message(server: OpenAIServer) -> None:
    server.script(
        Fail(400, "This model's maximum context length is 8192 tokens", code="context_too_long"),
        Stream(text_stream("never")),
    )
    h = Harness(server)
    err = h.fail(ask())
    assert err.kind is ErrorKind.bad_request
    assert err.attempts == 1
    assert "maximum context length is 8192 tokens" in str(err)
    assert "HTTP 400" in err.detail
    assert h.waits == []
    assert len(server.received) == 1


def test_retries_exhausted_fail_with_details(server: OpenAIServer) -> None:
    server.script(*(Fail(500, f"internal error #{i}", type="server_error") for i in range(4)))
    h = Harness(server)
    err = h.fail(ask())
    assert err.kind is ErrorKind.server
    assert err.attempts == 4
    assert h.waits == [0, 0.01, 0.02]
    assert "HTTP 500: internal error #3" in str(err)
    assert str(err).startswith("openai: server after 4 attempts")


def test_overloaded_exhausted(server: OpenAIServer) -> None:
    server.script(*(Fail(529, "Overloaded", type="overloaded_error") for _ in range(4)))
    h = Harness(server)
    err = h.fail(ask())
    assert err.kind is ErrorKind.overloaded and err.attempts == 4
    assert h.waits == [0.03, 0.03, 0.03]


def test_timeout_is_retried(server: OpenAIServer) -> None:
    server.script(Stream(text_stream("late"), stall=1.0), Stream(text_stream("on time")))
    h = Harness(server, timeout=0.3)
    assert h.chat(ask()).text == "on time"
    assert h.waits == [0]


def test_connection_refused_fails_after_retries() -> None:
    srv = OpenAIServer()
    base_url = srv.base_url
    srv.close()  # nothing listens there any more
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    provider = OpenAIProvider(API_KEY, base_url=base_url, timeout=2.0, policy=POLICY, sleep=sleep)
    with pytest.raises(ProviderCallFailed) as info:
        asyncio.run(provider.chat(ask()))
    assert info.value.kind is ErrorKind.timeout
    assert info.value.attempts == 4
    assert "connection failed" in str(info.value)
    assert waits == [0, 0.01, 0.02]
    assert API_KEY not in "".join(traceback.format_exception(info.value))


# ---------------------------------------------------------------- cut streams


def test_stream_dropped_early_is_retried(server: OpenAIServer) -> None:
    early = [chunk(role="assistant"), chunk(content="The answer is")]
    server.script(Stream(early, cut=True), Stream(text_stream("The answer is 42.")))
    h = Harness(server)
    resp = h.chat(ask())
    assert resp.text == "The answer is 42."
    assert resp.stop_reason is StopReason.end_turn
    assert h.waits == [0]
    assert len(server.received) == 2


def test_stream_ending_without_finish_reason_is_retried(server: OpenAIServer) -> None:
    early = [chunk(role="assistant"), chunk(content="The answer")]
    server.script(*(Stream(early, done=False) for _ in range(3)), Stream(text_stream("whole")))
    h = Harness(server)
    assert h.chat(ask()).text == "whole"
    assert h.waits == [0, 0.01, 0.02]
    server.script(*(Stream(early, done=False) for _ in range(4)))
    err = h.fail(ask())
    assert err.kind is ErrorKind.stream_cut
    assert "stream ended without a finish_reason after 2 chunk(s)" in str(err)


def test_stream_cut_every_time_fails_with_details(server: OpenAIServer) -> None:
    early = [chunk(role="assistant"), chunk(content="x")]
    server.script(*(Stream(early, cut=True) for _ in range(4)))
    h = Harness(server)
    err = h.fail(ask())
    assert err.kind is ErrorKind.stream_cut and err.attempts == 4
    assert "stream connection failed after 2 chunk(s)" in str(err)
    assert h.waits == [0, 0.01, 0.02]


def test_stream_dropped_late_keeps_the_partial_answer(server: OpenAIServer) -> None:
    """Cut after the finish_reason, before the usage chunk and [DONE]: the answer is whole."""
    late = [
        chunk(role="assistant", content="Here: "),
        chunk(tool_calls=[tool_piece(0, id="c1", name="get_time", arguments='{"tz": ')]),
        chunk(tool_calls=[tool_piece(0, arguments='"UTC"}')]),
        chunk(finish="tool_calls"),
    ]
    server.script(Stream(late, cut=True), Stream(text_stream("never asked")))
    h = Harness(server)
    resp = h.chat(ask())
    assert resp.stop_reason is StopReason.partial
    assert resp.text == "Here: "
    assert resp.tool_calls == (ToolCall("c1", "get_time", {"tz": "UTC"}),)
    assert resp.usage == Usage(0, 0)
    assert h.waits == []
    assert len(server.received) == 1


# ---------------------------------------------------------------- the key stays secret


def test_api_key_never_in_error_text(server: OpenAIServer) -> None:
    server.script(
        Fail(401, f"Incorrect API key provided: {API_KEY}.", code="invalid_api_key"),
        Fail(403, f"key {API_KEY} may not use this model"),
    )
    h = Harness(server)
    first = h.fail(ask())
    assert first.kind is ErrorKind.unauthorized and "Incorrect API key provided" in str(first)
    second = h.fail(ask())
    assert "[redacted] may not use this model" in str(second)
    assert API_KEY not in repr(h.provider)


def test_overloaded_error_event_inside_the_stream(server: OpenAIServer) -> None:
    event = {"error": {"message": "Overloaded", "type": "overloaded_error", "code": None}}
    server.script(
        Stream([chunk(role="assistant"), event], done=False), Stream(text_stream("after"))
    )
    h = Harness(server)
    assert h.chat(ask()).text == "after"
    assert h.waits == [0.03]
