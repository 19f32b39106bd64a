"""AnthropicProvider against a loopback server speaking the Messages API wire format.

The official SDK is the client and real HTTP carries every byte; the server is scripted
per test (tests/integration/llm_servers.py). Waits between retries go through a recording
`sleep`, so the error table's schedule is checked without waiting for it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from pfar.llm.anthropic_provider import AnthropicProvider, validate_schema
from pfar.llm.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSchema,
)
from pfar.llm.retry import ErrorKind, ProviderCallFailed, RetryPolicy

from .llm_servers import (
    ScriptedLLMServer,
    SSEEvent,
    SSEReply,
    anthropic_block_stop,
    anthropic_error_event,
    anthropic_error_reply,
    anthropic_message_start,
    anthropic_stream,
    anthropic_text_block,
    anthropic_thinking_block,
    anthropic_tool_use_block,
    thinking_signature,
)

API_KEY = "sk-ant-test-0123456789-SECRET"
POLICY = RetryPolicy(backoff=(0, 0.01, 0.02), overloaded_wait=0.03)
T = TypeVar("T")

READ_FILE = ToolSchema(
    name="read_file",
    description="Read a file.",
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "count": {"type": "integer"},
            "mode": {"type": "string", "enum": ["text", "bytes"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["path"],
    },
)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as s:
        yield s


class Recorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def call(
    server_url: str,
    request: ChatRequest,
    *,
    timeout: float = 5.0,
    recorder: Recorder | None = None,
) -> ChatResponse:
    rec = recorder or Recorder()

    async def go() -> ChatResponse:
        async with AnthropicProvider(
            API_KEY, base_url=server_url, timeout=timeout, policy=POLICY, sleep=rec.sleep
        ) as provider:
            return await provider.chat(request)

    return run(go())


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def failure(
    server_url: str, request: ChatRequest, recorder: Recorder, **kw: Any
) -> ProviderCallFailed:
    with pytest.raises(ProviderCallFailed) as info:
        call(server_url, request, recorder=recorder, **kw)
    assert API_KEY not in str(info.value)
    assert API_KEY not in repr(info.value.detail)
    return info.value


def ask(text: str = "hello", **kw: Any) -> ChatRequest:
    return ChatRequest(
        model="claude-test", system="be brief", messages=(Message("user", text),), **kw
    )


def text_answer(text: str = "Hi there!", output_tokens: int = 7) -> SSEReply:
    return SSEReply(
        anthropic_stream(
            anthropic_text_block(0, [text[:3], text[3:]]),
            input_tokens=12,
            output_tokens=output_tokens,
        )
    )


# ------------------------------------------------------------------------------- answers


def test_text_answer_with_usage_stop_reason_and_timings(server: ScriptedLLMServer) -> None:
    server.script(text_answer("Hi there!"))
    response = call(server.url, ask())
    assert response.text == "Hi there!"
    assert response.stop_reason is StopReason.end_turn
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    assert response.model == "claude-test"
    assert response.tool_calls == () and response.invalid_tool_calls == ()
    assert response.time_to_first_token is not None
    assert 0 < response.time_to_first_token <= response.total_time


def test_tool_use_with_json_split_across_deltas(server: ScriptedLLMServer) -> None:
    server.script(
        SSEReply(
            anthropic_stream(
                anthropic_text_block(0, ["Let me ", "look."]),
                anthropic_tool_use_block(
                    1,
                    "toolu_01",
                    "read_file",
                    ['{"pa', 'th": "not', 'es/x.txt", "cou', 'nt": 3, "tags": ["a"', ', "b"]}'],
                ),
                stop_reason="tool_use",
            )
        )
    )
    response = call(server.url, ask(tools=(READ_FILE,)))
    assert response.stop_reason is StopReason.tool_use
    assert response.text == "Let me look."
    assert response.tool_calls == (
        ToolCall("toolu_01", "read_file", {"path": "notes/x.txt", "count": 3, "tags": ["a", "b"]}),
    )
    assert response.invalid_tool_calls == ()


def test_thinking_is_kept_out_of_the_answer(server: ScriptedLLMServer) -> None:
    server.script(
        SSEReply(
            anthropic_stream(
                anthropic_thinking_block(0, ["SECRET-PLAN: first ", "think hard"]),
                anthropic_text_block(1, ["The answer ", "is 4."]),
            )
        )
    )
    response = call(server.url, ask("2+2?"))
    assert response.text == "The answer is 4."
    # kept apart, whole, with its signature: sent back as the API requires, never the text
    (block,) = response.thinking
    assert block.kind == "thinking" and block.thinking == "SECRET-PLAN: first think hard"
    assert block.signature == thinking_signature("SECRET-PLAN: first think hard")


def test_a_thinking_request_sends_its_budget_no_temperature_and_the_blocks_back_first(
    server: ScriptedLLMServer,
) -> None:
    """What the API requires with extended thinking: the budget, no temperature, and the
    earlier answer's thinking (and redacted thinking) unchanged before its text and call;
    a redacted_thinking block streamed in is kept whole, apart from the text."""
    sig = thinking_signature("plan")
    kept = (
        ThinkingBlock("thinking", thinking="plan", signature=sig),
        ThinkingBlock("redacted_thinking", data="ENCRYPTED=="),
    )
    call_ = ToolCall("toolu_1", "lookup", {})
    messages = (
        Message("user", "look it up"),
        Message("assistant", "Looking.", tool_calls=(call_,), thinking=kept),
        Message("user", tool_results=(ToolResult("toolu_1", "found"),)),
    )
    redacted = [
        SSEEvent(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "MORE=="},
            },
        ),
        anthropic_block_stop(0),
    ]
    server.script(SSEReply(anthropic_stream(redacted, anthropic_text_block(1, ["Found."]))))
    request = ChatRequest(
        model="claude-test",
        system="",
        messages=messages,
        tools=(ToolSchema("lookup", "look", {"type": "object"}),),
        temperature=0.3,
        thinking_budget=2048,
    )
    response = call(server.url, request)
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": sig},
        {"type": "redacted_thinking", "data": "ENCRYPTED=="},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
    ]
    assert response.text == "Found."
    assert response.thinking == (ThinkingBlock("redacted_thinking", data="MORE=="),)


def test_a_request_that_does_not_think_sends_no_thinking_back(server: ScriptedLLMServer) -> None:
    kept = (ThinkingBlock("thinking", thinking="plan", signature=thinking_signature("plan")),)
    messages = (Message("user", "hi"), Message("assistant", "Hello.", thinking=kept))
    server.script(text_answer())
    call(
        server.url,
        ChatRequest(model="claude-test", system="", messages=(*messages, Message("user", "again"))),
    )
    body = server.requests[0].body
    assert "thinking" not in body
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Hello."}]


# ---------------------------------------------------------------------- invalid tool calls


def tool_answer(name: str, json_chunks: list[str]) -> SSEReply:
    return SSEReply(
        anthropic_stream(
            anthropic_tool_use_block(0, "toolu_bad", name, json_chunks), stop_reason="tool_use"
        )
    )


def only_invalid(response: ChatResponse) -> ToolResult:
    assert response.tool_calls == ()
    assert len(response.invalid_tool_calls) == 1
    result = response.invalid_tool_calls[0]
    assert result.tool_call_id == "toolu_bad" and result.is_error
    return result


def test_malformed_tool_json_becomes_an_error_tool_result(server: ScriptedLLMServer) -> None:
    server.script(tool_answer("read_file", ['{"path": "notes', '/x", "count": ']))
    response = call(server.url, ask(tools=(READ_FILE,)))
    assert response.stop_reason is StopReason.tool_use
    assert "not valid JSON" in only_invalid(response).content


def test_unknown_tool_becomes_an_error_tool_result(server: ScriptedLLMServer) -> None:
    server.script(tool_answer("delete_everything", ['{"path": "/"}']))
    result = only_invalid(call(server.url, ask(tools=(READ_FILE,))))
    assert "unknown tool 'delete_everything'" in result.content
    assert "read_file" in result.content  # names what is available


def test_input_not_matching_the_schema_becomes_an_error_tool_result(
    server: ScriptedLLMServer,
) -> None:
    server.script(tool_answer("read_file", ['{"count": "three", "mode": "pdf", "tags": [1]}']))
    content = only_invalid(call(server.url, ask(tools=(READ_FILE,)))).content
    assert "missing the required property 'path'" in content
    assert "input.count should be integer, not string" in content
    assert 'input.mode should be one of "text", "bytes"' in content
    assert "input.tags[0] should be string" in content


def test_valid_and_invalid_calls_in_one_answer(server: ScriptedLLMServer) -> None:
    server.script(
        SSEReply(
            anthropic_stream(
                anthropic_tool_use_block(0, "toolu_ok", "read_file", ['{"path": "a"}']),
                anthropic_tool_use_block(1, "toolu_bad", "read_file", ["[1, 2]"]),
                stop_reason="tool_use",
            )
        )
    )
    response = call(server.url, ask(tools=(READ_FILE,)))
    assert response.tool_calls == (ToolCall("toolu_ok", "read_file", {"path": "a"}),)
    assert [r.tool_call_id for r in response.invalid_tool_calls] == ["toolu_bad"]
    assert "should be object, not array" in response.invalid_tool_calls[0].content


@pytest.mark.parametrize(
    ("value", "schema", "ok"),
    [
        ({}, {"type": "object"}, True),
        ({"n": 2.0}, {"type": "object", "properties": {"n": {"type": "integer"}}}, True),
        ({"n": True}, {"type": "object", "properties": {"n": {"type": "number"}}}, False),
        ({"x": 1}, {"type": "object", "additionalProperties": False}, False),
        (None, {"type": ["string", "null"]}, True),
        ([[1]], {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}, False),
        ("anything", {"format": "uri"}, True),  # unknown keywords are accepted
    ],
)
def test_schema_subset(value: object, schema: dict[str, Any], ok: bool) -> None:
    assert (validate_schema(value, schema) == []) is ok


# ------------------------------------------------------------------------- the request


def test_the_request_the_server_receives(server: ScriptedLLMServer) -> None:
    server.script(text_answer())
    request = ChatRequest(
        model="claude-test",
        system="You are pfar.",
        messages=(
            Message("user", "read notes/x"),
            Message(
                "assistant",
                "Reading.",
                tool_calls=(ToolCall("toolu_1", "read_file", {"path": "notes/x"}),),
            ),
            Message(
                "user",
                "and?",
                tool_results=(ToolResult("toolu_1", "no such file", is_error=True),),
            ),
        ),
        tools=(READ_FILE,),
        max_tokens=321,
        temperature=0.2,
        tool_choice="read_file",
    )
    call(server.url, request)
    [received] = server.requests
    assert received.method == "POST" and received.path == "/v1/messages"
    # this SDK version sends the key as a bearer token; older ones used x-api-key
    assert (
        received.headers.get("x-api-key") == API_KEY
        or received.headers.get("authorization") == f"Bearer {API_KEY}"
    )
    assert "anthropic-version" in received.headers
    body = received.body
    assert body["stream"] is True
    assert body["model"] == "claude-test"
    assert body["system"] == "You are pfar."
    assert body["max_tokens"] == 321
    assert body["temperature"] == 0.2
    assert body["tool_choice"] == {"type": "tool", "name": "read_file"}
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": READ_FILE.input_schema,
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read notes/x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "notes/x"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "and?"},
            ],
        },
    ]


def test_optional_fields_are_left_out(server: ScriptedLLMServer) -> None:
    server.script(text_answer())
    call(server.url, ChatRequest(model="m", system="", messages=(Message("user", "hi"),)))
    body = server.requests[0].body
    assert not {"system", "tools", "tool_choice", "temperature"} & set(body)


# ------------------------------------------------------------------------ the error table


def test_429_waits_retry_after_then_succeeds(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(anthropic_error_reply(429, "slow down", retry_after=7), text_answer())
    assert call(server.url, ask(), recorder=rec).text == "Hi there!"
    assert rec.waits == [7.0]
    assert len(server.requests) == 2


def test_429_without_retry_after_uses_the_backoff(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(
        anthropic_error_reply(429, "slow down"),
        anthropic_error_reply(429, "slow down"),
        text_answer(),
    )
    call(server.url, ask(), recorder=rec)
    assert rec.waits == [0, 0.01]


def test_5xx_retries_with_the_backoff(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(
        anthropic_error_reply(500, "boom"),
        anthropic_error_reply(503, "unavailable", error_type="api_error"),
        text_answer(),
    )
    assert call(server.url, ask(), recorder=rec).text == "Hi there!"
    assert rec.waits == [0, 0.01]


def test_529_waits_the_overloaded_wait(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(anthropic_error_reply(529, "Overloaded"), text_answer())
    assert call(server.url, ask(), recorder=rec).text == "Hi there!"
    assert rec.waits == [0.03]


def test_overloaded_error_event_mid_stream_waits_the_overloaded_wait(
    server: ScriptedLLMServer,
) -> None:
    rec = Recorder()
    server.script(
        SSEReply(
            [
                anthropic_message_start(),
                *anthropic_text_block(0, ["Hal"])[:2],
                anthropic_error_event("overloaded_error", "Overloaded"),
            ]
        ),
        text_answer("Whole answer"),
    )
    response = call(server.url, ask(), recorder=rec)
    assert response.text == "Whole answer"  # nothing of the failed attempt leaks in
    assert rec.waits == [0.03]


def test_400_fails_at_once_with_the_api_message(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(
        anthropic_error_reply(400, "messages.1.content: tool_use ids must be unique"),
        text_answer(),
    )
    failed = failure(server.url, ask(), rec)
    assert failed.kind is ErrorKind.bad_request
    assert failed.attempts == 1
    assert "messages.1.content: tool_use ids must be unique" in str(failed)
    assert "invalid_request_error" in failed.detail
    assert "request-id req_" in failed.detail
    assert rec.waits == [] and len(server.requests) == 1


def test_other_4xx_fail_at_once(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(anthropic_error_reply(404, "model: claude-nope"))
    failed = failure(server.url, ask(), rec)
    assert failed.kind is ErrorKind.bad_request and "claude-nope" in failed.detail
    assert rec.waits == []


def test_retries_exhausted_fail_with_the_details(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(*(anthropic_error_reply(500, f"boom {i}") for i in range(4)))
    failed = failure(server.url, ask(), rec)
    assert failed.kind is ErrorKind.server
    assert failed.attempts == 4
    assert rec.waits == [0, 0.01, 0.02]
    assert "HTTP 500 api_error: boom 3" in failed.detail
    assert "anthropic: server after 4 attempts" in str(failed)
    assert len(server.requests) == 4


def test_overloaded_exhausted(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(*(anthropic_error_reply(529, "Overloaded") for _ in range(4)))
    failed = failure(server.url, ask(), rec)
    assert failed.kind is ErrorKind.overloaded and failed.attempts == 4
    assert rec.waits == [0.03, 0.03, 0.03]


def test_a_timeout_is_retried(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(SSEReply(text_answer().events, stall_seconds=1.0), text_answer("late"))
    response = call(server.url, ask(), timeout=0.3, recorder=rec)
    assert response.text == "late"
    assert rec.waits == [0]


def test_connection_refused_exhausts_as_timeout() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rec = Recorder()
    failed = failure(f"http://127.0.0.1:{port}", ask(), rec)
    assert failed.kind is ErrorKind.timeout
    assert failed.attempts == 4 and rec.waits == [0, 0.01, 0.02]
    assert "could not connect" in failed.detail


def test_the_api_key_is_scrubbed_from_errors(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(anthropic_error_reply(401, f"invalid x-api-key: {API_KEY}"))
    failed = failure(server.url, ask(), rec)
    assert failed.kind is ErrorKind.unauthorized  # never retried: the key is wrong
    assert rec.waits == []
    assert "invalid x-api-key: [api key]" in failed.detail


# ---------------------------------------------------------------------- a stream cut off

# max_tokens=100 and ~4 characters a token: 120 characters is 30%, 280 is 70%


def cut_stream(chars: int, *, end_early: bool = False) -> SSEReply:
    pieces = ["x" * 40] * (chars // 40)
    events = anthropic_stream(anthropic_text_block(0, pieces), output_tokens=chars // 4 + 5)
    # message_start, ping, block start, the text deltas: cut before the block stops
    return SSEReply(events, cut_after=3 + len(pieces), end_early=end_early)


def test_a_stream_cut_at_30_percent_is_retried(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(cut_stream(120), text_answer("Complete."))
    response = call(server.url, ask(max_tokens=100), recorder=rec)
    assert response.text == "Complete."
    assert response.stop_reason is StopReason.end_turn
    assert rec.waits == [0]
    assert len(server.requests) == 2


def test_a_stream_ending_early_at_30_percent_is_retried(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(cut_stream(120, end_early=True), text_answer("Complete."))
    assert call(server.url, ask(max_tokens=100), recorder=rec).text == "Complete."
    assert rec.waits == [0]


def test_a_stream_cut_at_70_percent_keeps_the_partial_answer(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(cut_stream(280), text_answer("never asked for"))
    response = call(server.url, ask(max_tokens=100), recorder=rec)
    assert response.stop_reason is StopReason.partial
    assert response.text == "x" * 280
    assert response.usage.input_tokens == 10
    assert rec.waits == [] and len(server.requests) == 1


def test_a_partial_answer_keeps_finished_tool_calls_only(server: ScriptedLLMServer) -> None:
    events = anthropic_stream(
        anthropic_tool_use_block(0, "toolu_done", "read_file", ['{"path": "', "x" * 300, '"}']),
        anthropic_tool_use_block(1, "toolu_open", "read_file", ['{"path": "y']),
        stop_reason="tool_use",
    )
    # message_start, ping, 5 events of block 0, block 1's start and first delta
    server.script(SSEReply(events, cut_after=9))
    response = call(server.url, ask(max_tokens=100, tools=(READ_FILE,)))
    assert response.stop_reason is StopReason.partial
    assert [c.id for c in response.tool_calls] == ["toolu_done"]
    assert response.invalid_tool_calls == ()


def test_streams_cut_every_time_fail_with_the_details(server: ScriptedLLMServer) -> None:
    rec = Recorder()
    server.script(*(cut_stream(40) for _ in range(4)))
    failed = failure(server.url, ask(max_tokens=100), rec)
    assert failed.kind is ErrorKind.stream_cut and failed.attempts == 4
    assert rec.waits == [0, 0.01, 0.02]
    assert "about 10 of 100 output tokens had arrived" in failed.detail


def test_server_records_parse_as_json(server: ScriptedLLMServer) -> None:
    """The wire framing is the API's: `event: <type>` then `data: <json>` per event."""
    encoded = text_answer().events[0].encode().decode()
    name_line, data_line, blank, end = encoded.split("\n")
    assert name_line == "event: message_start" and blank == end == ""
    assert json.loads(data_line.removeprefix("data: "))["type"] == "message_start"
