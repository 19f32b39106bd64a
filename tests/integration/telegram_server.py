"""A loopback Telegram Bot API server: the methods pfar's Telegram channel uses, with the
Bot API's own JSON shapes, so that python-telegram-bot is the real client.

getUpdates keeps updates until a request's offset confirms them (as Telegram does:
an update is delivered again until an offset above its id is sent), long-polls up to
its timeout, and honours `-1` (only the latest update). sendMessage numbers messages;
the owner (or anyone) "says" things with `say`, `reply` and `press`. `fail_next`
answers a method's next call with an error (a 429 with retry_after, a 401, ...), and
`cut_next` closes its connection with no answer (before handling it, or after).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

TOKEN = "123456:test-token-abcdef"
OWNER = 4242
CHAT = 4242


@dataclass
class Sent:
    message_id: int
    chat_id: int
    text: str
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    reply_to: int | None
    at: float = 0.0  # time.monotonic() when the server stored it


@dataclass
class BotApi:
    token: str = TOKEN
    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answered: list[dict[str, Any]] = field(default_factory=list)
    edited: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[tuple[int, int]] = field(default_factory=list)
    failures: dict[str, deque[tuple[int, str, dict[str, Any]]]] = field(default_factory=dict)
    next_update: int = 100
    next_message: int = 1000
    confirmed: int = 0  # the highest offset a getUpdates sent (updates below it are gone)
    # (method, time.monotonic(), HTTP status) of each answer an error gave
    refusals: list[tuple[str, float, int]] = field(default_factory=list)
    cuts: dict[str, deque[bool]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                api._connections.add(self.connection)

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n).decode()
                params = _params(self.headers.get("Content-Type") or "", raw)
                token, _, method = self.path.removeprefix("/bot").partition("/")
                with api._lock:
                    queued = api.cuts.get(method)
                    cut = queued.popleft() if queued else None
                if cut is False:  # cut before the request was handled
                    self._cut()
                    return
                status, body = api.call(token, method, params)
                if cut:  # handled (a message stored), and the answer never leaves
                    self._cut()
                    return
                out = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the kernel was killed during its long poll

            do_GET = do_POST

            def _cut(self) -> None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        self._handler = Handler
        self._connections: set[socket.socket] = set()
        self._serve(0)

    def _serve(self, port: int) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def go_away(self) -> None:
        """The server is gone: connections to its port are refused."""
        self.port = self.httpd.server_address[1]
        self.close()
        for connection in list(self._connections):  # kept-alive ones too
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._connections.clear()

    def come_back(self) -> None:
        """... and back, on the same port."""
        self._serve(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    port: int = 0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- what the people in the chat do ------------------------------------------------

    def _push(self, update: dict[str, Any]) -> int:
        with self._lock:
            update["update_id"] = self.next_update
            self.next_update += 1
            self.updates.append(update)
            self._lock.notify_all()
            return int(update["update_id"])

    def _message(
        self, text: str, user: int, reply_to: int | None, chat: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        with self._lock:
            self.next_message += 1
            message_id = self.next_message
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat or {"id": CHAT, "type": "private"},
            "from": {"id": user, "is_bot": False, "first_name": "someone"},
            "text": text,
        }
        if reply_to is not None:
            message["reply_to_message"] = {
                "message_id": reply_to,
                "date": int(time.time()),
                "chat": {"id": CHAT, "type": "private"},
                "text": "(pfar's message)",
            }
        return message

    def say(
        self,
        text: str,
        *,
        user: int = OWNER,
        reply_to: int | None = None,
        chat: dict[str, Any] | None = None,
    ) -> int:
        """A message in the chat (or in `chat`, e.g. a group); its update id."""
        return self._push({"message": self._message(text, user, reply_to, chat)})

    def press(
        self, sent: Sent, data: str, *, user: int = OWNER, chat: dict[str, Any] | None = None
    ) -> int:
        """A button under `sent` pressed (shown in `chat`, by default the private one);
        its update id."""
        query = {
            "id": f"cb{self.next_update}",
            "from": {"id": user, "is_bot": False, "first_name": "someone"},
            "chat_instance": "1",
            "data": data,
            "message": {
                "message_id": sent.message_id,
                "date": int(time.time()),
                "chat": chat or {"id": CHAT, "type": "private"},
                "text": sent.text,
            },
        }
        return self._push({"callback_query": query})

    def fail_next(self, method: str, status: int, description: str, **extra: Any) -> None:
        self.failures.setdefault(method, deque()).append((status, description, extra))

    def cut_next(self, method: str, *, after_handling: bool) -> None:
        """The connection of `method`'s next call is closed with no answer: before the
        server handled it, or after (a sendMessage's message is stored: it arrived)."""
        with self._lock:
            self.cuts.setdefault(method, deque()).append(after_handling)

    # -- the API --------------------------------------------------------------------

    def call(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.calls.append((method, params))
            if token != self.token:
                return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
            queued = self.failures.get(method)
            if queued:
                status, description, extra = queued.popleft()
                self.refusals.append((method, time.monotonic(), status))
                return status, {
                    "ok": False,
                    "error_code": status,
                    "description": description,
                    **({"parameters": extra} if extra else {}),
                }
        if method == "getUpdates":
            return 200, {"ok": True, "result": self._get_updates(params)}
        with self._lock:
            try:
                return 200, {"ok": True, "result": self._method(method, params)}
            except _Refused as refused:
                error = {"error_code": refused.status, "description": refused.description}
                return refused.status, {"ok": False, **error}

    def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + min(timeout, 5.0)
        with self._lock:
            while True:
                if offset == -1 and self.updates:
                    return self.updates[-1:]
                if offset > self.confirmed:
                    self.confirmed = offset
                    self.updates = [u for u in self.updates if u["update_id"] >= offset]
                found = (
                    [] if offset == -1 else [u for u in self.updates if u["update_id"] >= offset]
                )
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found
                self._lock.wait(left)

    def _method(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return {"id": 1, "is_bot": True, "first_name": "pfar", "username": "pfar_bot"}
        if method == "sendMessage":
            replied = _reply_to(params)
            if replied is not None and (int(params["chat_id"]), replied) in self.deleted:
                given = params.get("reply_parameters")
                if not (isinstance(given, dict) and given.get("allow_sending_without_reply")):
                    # as Telegram does
                    raise _Refused(400, "Bad Request: message to be replied not found")
                replied = None
            self.next_message += 1
            sent = Sent(
                self.next_message,
                int(params["chat_id"]),
                str(params["text"]),
                params.get("parse_mode"),
                params.get("reply_markup"),
                replied,
                time.monotonic(),
            )
            self.sent.append(sent)
            return {
                "message_id": sent.message_id,
                "date": int(time.time()),
                "chat": {"id": sent.chat_id, "type": "private"},
                "text": sent.text,
            }
        if method == "answerCallbackQuery":
            self.answered.append(params)
            return True
        if method == "editMessageReplyMarkup":
            self.edited.append(params)
            return True
        if method == "deleteMessage":
            self.deleted.append((int(params["chat_id"]), int(params["message_id"])))
            return True
        if method in {"close", "logOut"}:
            return True
        raise AssertionError(f"the loopback Bot API has no method {method}")


class _Refused(Exception):
    def __init__(self, status: int, description: str) -> None:
        self.status, self.description = status, description


def _reply_to(params: dict[str, Any]) -> int | None:
    """The message a sendMessage answers: `reply_parameters` (or the older field)."""
    given = params.get("reply_parameters")
    if isinstance(given, dict) and given.get("message_id"):
        return int(given["message_id"])
    old = params.get("reply_to_message_id")
    return int(old) if old else None


def _params(content_type: str, raw: str) -> dict[str, Any]:
    if not raw:
        return {}
    if content_type.startswith("application/json"):
        return dict(json.loads(raw))
    out: dict[str, Any] = {}
    for key, values in parse_qs(raw, keep_blank_values=True).items():
        value = values[-1]
        try:
            out[key] = json.loads(value) if value[:1] in "[{" else value
        except ValueError:
            out[key] = value
    return out


def unescape(text: str) -> str:
    """MarkdownV2 as sent, back to the text it shows."""
    out, escaped = [], False
    for ch in text:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)
