"""Loopback LLM API servers for the provider tests: real HTTP on 127.0.0.1, scripted per test.

The server part is generic: `ScriptedLLMServer` pops one scripted reply per request from a
queue and records every request it receives. A reply is either `JsonReply` (any status, JSON
body, headers) or `SSEReply` (a `text/event-stream` body of server-sent events, sent with
chunked transfer encoding like the real APIs, that can stall before answering or be cut off
after N events by closing the connection).

Wire formats live in their own clearly named helpers, so another API can be added beside
them: the `anthropic_*` functions build the Anthropic Messages API's events and error
bodies (`event: <type>` / `data: <json>` framing). An OpenAI-compatible set would build
`SSEEvent(None, {...})` chunks ending in `SSEEvent(None, "[DONE]")`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# ---------------------------------------------------------------------------------------------
# generic: replies, recorded requests, the server


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: `event: <name>` (omitted when None) and `data: <json or text>`."""

    name: str | None
    data: dict[str, Any] | str

    def encode(self) -> bytes:
        data = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.name}\n" if self.name is not None else ""
        return f"{head}data: {data}\n\n".encode()


class Gate:
    """Holds a streamed answer after its first `after` events until the client opens it.

    A client that streams sees those events while the rest is held, and opens the gate;
    one that waits for the whole answer never does, and the server goes on after
    `timeout` seconds with `timed_out` set, so the test fails instead of hanging."""

    def __init__(self, after: int, timeout: float = 5.0) -> None:
        self.after, self.timeout = after, timeout
        self._open = threading.Event()
        self.timed_out = False

    def open(self) -> None:
        self._open.set()

    def hold(self) -> None:
        self.timed_out = not self._open.wait(self.timeout)


@dataclass(frozen=True, slots=True)
class SSEReply:
    """A streamed answer. `cut_after`: send that many events, then drop the connection
    (no final chunk). `end_early`: send `cut_after` events, then end the body cleanly."""

    events: Sequence[SSEEvent]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    end_early: bool = False
    stall_seconds: float = 0.0  # wait before sending the status line
    gate: Gate | None = None  # hold the rest of the answer until the client opens it


@dataclass(frozen=True, slots=True)
class JsonReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    stall_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Drop:
    """No answer: the connection is closed. `before_reading`: before the request's body
    is read (the server never stored the request); else after it was read and recorded."""

    before_reading: bool = False


Reply = SSEReply | JsonReply | Drop


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or the raw text when it is not JSON


class ScriptedLLMServer:
    """A loopback HTTP server answering each request with the next scripted reply.

    With no reply left it answers 599 with a body saying so, so a test that makes more
    calls than it scripted fails loudly. With `api_key` set, a request that does not
    carry that key (`x-api-key`, or `Authorization: Bearer`) gets the API's 401 instead,
    and no scripted reply is used up.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        # what POST /v1/messages/count_tokens answers for a body (the real tokenizer is
        # the API's own: any fixed rule does for tests), without using up a reply
        self.count_tokens: Callable[[dict[str, Any]], int] = lambda body: len(json.dumps(body)) // 3
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._request_counter = 0
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # don't wait for a client's idle keep-alive
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        for reply in replies:
            self.replies.put(reply)

    def accepts(self, headers: Any) -> bool:
        if self.api_key is None:
            return True
        sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        return bool(sent == self.api_key)

    def next_request_id(self) -> str:
        with self._lock:
            self._request_counter += 1
            return f"req_{self._request_counter:04d}"

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as the real APIs

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            with server.replies.mutex:
                head = server.replies.queue[0] if server.replies.queue else None
                if isinstance(head, Drop) and head.before_reading:
                    server.replies.queue.popleft()
                else:
                    head = None
            if head is not None:
                self._drop()
                return
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            server.record(
                RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
            )
            refused = (
                anthropic_request_problem(body)
                if self.path.endswith("/v1/messages") and isinstance(body, dict)
                else None
            )
            if self.path.endswith("/v1/messages/count_tokens") and isinstance(body, dict):
                self._count_tokens(body)
                return
            try:
                if not server.accepts(self.headers):
                    reply = anthropic_error_reply(401, "invalid x-api-key")
                elif refused is not None:  # as the real API does: no answer is used up
                    reply = anthropic_error_reply(400, refused)
                else:
                    reply = server.replies.get_nowait()
            except queue.Empty:
                reply = JsonReply(599, {"error": "no scripted reply left for this request"})
            try:
                if not isinstance(reply, Drop) and reply.stall_seconds:
                    time.sleep(reply.stall_seconds)
                if isinstance(reply, Drop):
                    self._drop()
                elif isinstance(reply, JsonReply):
                    self._send_json(reply)
                else:
                    self._send_stream(reply)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (a timeout test)

        def _count_tokens(self, body: dict[str, Any]) -> None:
            """As the real endpoint: the model and messages required, no `max_tokens` or
            `stream` (extra fields are refused), the conversation's rules kept."""
            extra = sorted(set(body) - _COUNT_FIELDS)
            problem = anthropic_request_problem(body)
            if not server.accepts(self.headers):
                reply = anthropic_error_reply(401, "invalid x-api-key")
            elif extra:
                reply = anthropic_error_reply(400, f"{extra[0]}: Extra inputs are not permitted")
            elif not body.get("model"):
                reply = anthropic_error_reply(400, "model: Field required")
            elif problem is not None:
                reply = anthropic_error_reply(400, problem)
            else:
                reply = JsonReply(200, {"input_tokens": server.count_tokens(body)})
            self._send_json(reply)

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _start(self, status: int, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("request-id", server.next_request_id())
            for name, value in headers.items():
                self.send_header(name, value)

        def _send_json(self, reply: JsonReply) -> None:
            payload = json.dumps(reply.body).encode()
            self._start(reply.status, "application/json", reply.headers)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def _send_stream(self, reply: SSEReply) -> None:
            self._start(reply.status, "text/event-stream; charset=utf-8", reply.headers)
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            events = list(reply.events)
            if reply.cut_after is not None:
                events = events[: reply.cut_after]
            for i, event in enumerate(events):
                if reply.gate is not None and i == reply.gate.after:
                    reply.gate.hold()
                self._chunk(event.encode())
            if reply.cut_after is not None and not reply.end_early:
                # drop the connection mid-body: no terminating chunk
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


# ---------------------------------------------------------------------------------------------
# Anthropic Messages API wire format

# what POST /v1/messages/count_tokens takes
_COUNT_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}
)


def anthropic_request_problem(body: dict[str, Any]) -> str | None:
    """Why the Messages API would refuse `body` with a 400, in its own words, or None.

    The documented rules a conversation must keep: the first message is the user's and
    roles alternate; every message has content, except an optional final assistant
    message; a text block holds more than whitespace; every `tool_use` is answered by a
    `tool_result` in the very next message, and a `tool_result` answers a `tool_use` of
    the message before it."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    problem = _thinking_problem(body, messages)
    if problem is not None:
        return problem
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    open_calls: list[str] = []
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if i and role == messages[i - 1].get("role"):
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        last = i == len(messages) - 1
        if not blocks or (isinstance(content, str) and not content):
            if not (last and role == "assistant"):
                return (
                    f"messages.{i}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
        blocks = blocks or []
        for j, block in enumerate(blocks):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                if not (last and role == "assistant"):
                    return f"messages.{i}.content.{j}.text: text content blocks must be non-empty"
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if open_calls:
            missing = [c for c in open_calls if c not in answered]
            if missing:
                return (
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
        stray = [a for a in answered if a not in open_calls]
        if stray:
            return (
                f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(map(str, stray))}. Each `tool_result` block must have "
                "a corresponding `tool_use` block in the previous message."
            )
        open_calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if open_calls and last:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(map(str, open_calls))}. Each `tool_use` block "
                "must have a corresponding `tool_result` block in the next message."
            )
    return None


def _thinking_problem(body: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """Extended thinking's rules, as the API states them: a budget of at least 1024
    tokens and less than max_tokens, no temperature but 1; a thinking block sent back
    exactly as it was given (its signature checks its text and the model asked); and,
    with thinking on, the last assistant message, when it made tool calls, starts with
    its thinking."""
    for i, msg in enumerate(messages):
        content = msg.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if block.get("type") != "thinking":
                continue
            text, model = str(block.get("thinking", "")), str(body.get("model", ""))
            if block.get("signature") != thinking_signature(text, model):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= int(body.get("max_tokens", 0)):
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    if body.get("temperature", 1) != 1:
        return "`temperature` may only be set to 1 when thinking is enabled"
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last is not None:
        content = messages[last].get("content")
        blocks = content if isinstance(content, list) else []
        calls = any(b.get("type") == "tool_use" for b in blocks)
        first = blocks[0].get("type") if blocks else "text"
        if calls and first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message "
                "must start with a thinking block (preceeding the lastmost set of `tool_use` "
                "and `tool_result` blocks)."
            )
    return None


def anthropic_message_start(
    *, model: str = "claude-test", input_tokens: int = 10, message_id: str = "msg_test_01"
) -> SSEEvent:
    return SSEEvent(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        },
    )


def anthropic_text_block(index: int, chunks: Iterable[str]) -> list[SSEEvent]:
    """content_block_start / a text_delta per chunk / content_block_stop."""
    events = [
        SSEEvent(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
    ]
    events += [
        SSEEvent(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": c},
            },
        )
        for c in chunks
    ]
    events.append(anthropic_block_stop(index))
    return events


def anthropic_tool_use_block(
    index: int, tool_id: str, name: str, json_chunks: Iterable[str]
) -> list[SSEEvent]:
    """A tool_use block whose input arrives as `input_json_delta` pieces (joined by the client)."""
    events = [
        SSEEvent(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
            },
        )
    ]
    events += [
        SSEEvent(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": c},
            },
        )
        for c in json_chunks
    ]
    events.append(anthropic_block_stop(index))
    return events


def thinking_signature(text: str, model: str = "claude-test") -> str:
    """The signature this server gives a thinking block: bound to its text and to the
    model that wrote it, as the real API's is (it refuses a block whose text or
    signature was changed, and another model cannot take it)."""
    digest = hashlib.sha256(f"pfar-test:{model}:{text}".encode()).digest()
    return base64.b64encode(digest).decode()


def anthropic_thinking_block(
    index: int, chunks: Sequence[str], *, model: str = "claude-test"
) -> list[SSEEvent]:
    """A thinking block: its text as `thinking_delta` pieces, then its `signature_delta`."""
    events = [
        SSEEvent(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        )
    ]
    events += [
        SSEEvent(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "thinking_delta", "thinking": c},
            },
        )
        for c in chunks
    ]
    events.append(
        SSEEvent(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {
                    "type": "signature_delta",
                    "signature": thinking_signature("".join(chunks), model),
                },
            },
        )
    )
    events.append(anthropic_block_stop(index))
    return events


def anthropic_block_stop(index: int) -> SSEEvent:
    return SSEEvent("content_block_stop", {"type": "content_block_stop", "index": index})


def anthropic_ping() -> SSEEvent:
    return SSEEvent("ping", {"type": "ping"})


def anthropic_message_delta(stop_reason: str | None, output_tokens: int) -> SSEEvent:
    return SSEEvent(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )


def anthropic_message_stop() -> SSEEvent:
    return SSEEvent("message_stop", {"type": "message_stop"})


def anthropic_error_event(error_type: str, message: str) -> SSEEvent:
    """An error sent inside a 200 stream (e.g. `overloaded_error`)."""
    return SSEEvent("error", {"type": "error", "error": {"type": error_type, "message": message}})


def anthropic_stream(
    *blocks: list[SSEEvent],
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    model: str = "claude-test",
) -> list[SSEEvent]:
    """A whole answer: message_start, a ping, the blocks, message_delta, message_stop."""
    events = [anthropic_message_start(model=model, input_tokens=input_tokens), anthropic_ping()]
    for block in blocks:
        events += block
    events += [anthropic_message_delta(stop_reason, output_tokens), anthropic_message_stop()]
    return events


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def anthropic_error_reply(
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    retry_after: float | None = None,
) -> JsonReply:
    """An error status with the API's body: {"type":"error","error":{"type":...,"message":...}}."""
    headers = {"x-should-retry": "true" if status in (408, 409, 429) or status >= 500 else "false"}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return JsonReply(
        status,
        {
            "type": "error",
            "error": {
                "type": error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error"),
                "message": message,
            },
        },
        headers,
    )


def failing(n: int, status: int, message: str = "boom") -> list[Reply]:
    """`n` error replies of the Messages API with `status` (500, 529, 429...)."""
    return [anthropic_error_reply(status, message) for _ in range(n)]
