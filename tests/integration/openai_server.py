"""A loopback server that speaks OpenAI's chat-completions wire format, scripted per test.

POST /v1/chat/completions answers with the next scripted reply:

* `Stream(chunks)`: 200, `text/event-stream`, one `data: {json}\\n\\n` event per
  chunk, then `data: [DONE]\\n\\n` (unless `done=False`), sent with chunked
  transfer encoding. `cut=True` closes the socket after the chunks without
  finishing the body (what a dropped connection looks like to the client);
  `stall` waits that many seconds before answering.
* `Fail(status, message)`: an error status with OpenAI's error body
  `{"error": {"message", "type", "code"}}` and any extra headers (retry-after).
* `Drop(before_reading)`: the connection closed with no answer, before the request
  was read (and recorded) or after.

Every request is recorded (path, headers, JSON body). An unscripted request
gets a 500 that says so.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .llm_servers import Drop, Gate

MODEL = "gpt-test"


@dataclass(frozen=True)
class Stream:
    chunks: list[dict[str, Any]]
    done: bool = True
    cut: bool = False
    stall: float = 0.0
    gate: Gate | None = None  # hold the rest after `gate.after` chunks until the client opens it


@dataclass(frozen=True)
class Fail:
    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]


def chunk(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    role: str | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tool_piece(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """One entry of `delta.tool_calls`: the first piece carries id and name, the rest arguments."""
    piece: dict[str, Any] = {"index": index}
    if id is not None:
        piece["id"] = id
        piece["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        piece["function"] = function
    return piece


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The last chunk of `stream_options.include_usage`: no choices, only usage."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text_stream(*pieces: str, usage: tuple[int, int] | None = (10, 5)) -> list[dict[str, Any]]:
    """Role chunk, one chunk per piece, finish_reason "stop", then usage (if any)."""
    chunks = [chunk(role="assistant", content="")]
    chunks += [chunk(content=p) for p in pieces]
    chunks.append(chunk(finish="stop"))
    if usage is not None:
        chunks.append(usage_chunk(*usage))
    return chunks


class OpenAIServer:
    """ThreadingHTTPServer on 127.0.0.1:0; `base_url` is what the SDK is given."""

    def __init__(self) -> None:
        self.replies: deque[Stream | Fail | Drop] = deque()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                with owner._lock:
                    head = owner.replies[0] if owner.replies else None
                    if isinstance(head, Drop) and head.before_reading:
                        owner.replies.popleft()
                        self._drop()
                        return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with owner._lock:
                    owner.received.append(
                        Received(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(raw or b"{}"),
                        )
                    )
                    reply = owner.replies.popleft() if owner.replies else None
                if self.path != "/v1/chat/completions":
                    self._fail(Fail(404, f"no route {self.path}"))
                elif reply is None:
                    self._fail(Fail(500, "no scripted reply left", type="server_error"))
                elif isinstance(reply, Fail):
                    self._fail(reply)
                elif isinstance(reply, Drop):
                    self._drop()
                else:
                    self._stream(reply)

            def _drop(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def _fail(self, fail: Fail) -> None:
                body = json.dumps(
                    {"error": {"message": fail.message, "type": fail.type, "code": fail.code}}
                ).encode()
                self.send_response(fail.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in fail.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, stream: Stream) -> None:
                if stream.stall:
                    time.sleep(stream.stall)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = [f"data: {json.dumps(c)}\n\n".encode() for c in stream.chunks]
                if stream.done and not stream.cut:
                    events.append(b"data: [DONE]\n\n")
                try:
                    for i, event in enumerate(events):
                        if stream.gate is not None and i == stream.gate.after:
                            stream.gate.hold()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                    if stream.cut:
                        # drop the connection mid-body: no terminating chunk
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client went away (e.g. it timed out)
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Stream | Fail | Drop) -> None:
        with self._lock:
            self.replies.extend(replies)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
