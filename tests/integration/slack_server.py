"""A loopback Slack: the Web API methods pfar's Slack channel uses, with Slack's own JSON
shapes and errors, and a Socket Mode WebSocket server, so that slack_sdk is the real
client (in the manner of slack_sdk's own `mock_socket_mode_server.py`).

The Socket Mode side says `hello` on each connection, pushes envelopes (`events_api`
for the owner's messages, `interactive` for button presses) and keeps each until it
is acknowledged with its `envelope_id`; `redeliver()` sends the unacknowledged ones
again with `retry_attempt` raised, as Slack does. `disconnect_frame()` sends a
`disconnect` envelope; `drop()` closes the socket without one. Everything the owner
says also lands in the DM's history (`conversations.history`), delivered or not.

It runs on its own event loop in a thread, so a kernel in another process or on the
test's own loop can use it alike.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN = "xoxb-1-loopback-bot-token"
APP_TOKEN = "xapp-1-loopback-app-token"
OWNER = "U0OWNER"
TEAM = "T0TEAM"
DM = "D0OWNERDM"
BOT_ID = "B0PFAR"


@dataclass
class Posted:
    ts: str
    channel: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None

    def buttons(self) -> list[dict[str, Any]]:
        for block in self.blocks:
            if block.get("type") == "actions":
                return list(block["elements"])
        return []


@dataclass
class SlackApi:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    posted: list[Posted] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)
    ephemeral: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    unacked: dict[str, dict[str, Any]] = field(default_factory=dict)
    connections: int = 0
    hellos: int = 0
    failures: dict[str, deque[tuple[int, dict[str, Any], dict[str, str]]]] = field(
        default_factory=dict
    )
    refuse_sockets: bool = False

    def __post_init__(self) -> None:
        self._ts = itertools.count(1)
        self._envelopes = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)

    # -- the server ----------------------------------------------------------------

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{self.port}"
        started.set()
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            for ws in list(self._sockets):
                await ws.close()
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def fail_next(
        self, method: str, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        with self._lock:
            self.failures.setdefault(method, deque()).append((status, body, headers or {}))

    def next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(dict(await request.post()))
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        with self._lock:
            self.calls.append((method, args))
            failing = self.failures.get(method)
            failure = failing.popleft() if failing else None
        if failure is not None:
            status, body, headers = failure
            return web.json_response(body, status=status, headers=headers)
        wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != wanted:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response({"ok": True, **handler(args)})

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"user_id": "U0PFARBOT", "team_id": TEAM, "bot_id": BOT_ID}

    def _apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/link"}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"channel": {"id": DM}}

    def _chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = self.next_ts()
        blocks = args.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        posted = Posted(ts, args["channel"], args.get("text", ""), blocks, args.get("thread_ts"))
        with self._lock:
            self.posted.append(posted)
            self.history.append(
                {"type": "message", "bot_id": BOT_ID, "text": posted.text, "ts": ts}
            )
        return {"channel": args["channel"], "ts": ts, "message": {"text": posted.text}}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.updated.append(args)
        return {"channel": args["channel"], "ts": args["ts"]}

    def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.deleted.append(args)
        return {"channel": args["channel"], "ts": args["ts"]}

    def _chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.ephemeral.append(args)
        return {"message_ts": self.next_ts()}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        oldest = float(args.get("oldest") or 0)
        with self._lock:
            found = [m for m in self.history if float(m["ts"]) > oldest]
        return {"messages": list(reversed(found)), "has_more": False}

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        if self.refuse_sockets:
            raise web.HTTPServiceUnavailable()
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        self.hellos += 1
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    ack = json.loads(frame.data)
                    with self._lock:
                        self.acked.append(ack["envelope_id"])
                        self.unacked.pop(ack["envelope_id"], None)
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    # -- what the test does ----------------------------------------------------------

    @property
    def connected(self) -> bool:
        return bool(self._sockets)

    def _push(self, envelope: dict[str, Any]) -> bool:
        async def push() -> bool:
            if not self._sockets:
                return False
            await self._sockets[-1].send_str(json.dumps(envelope))
            return True

        with self._lock:
            self.unacked[envelope["envelope_id"]] = envelope
        return bool(self._call(push()))

    def say(
        self,
        text: str,
        *,
        user: str = OWNER,
        team: str = TEAM,
        channel: str = DM,
        thread: str | None = None,
        deliver: bool = True,
    ) -> str:
        """The owner (or `user`) writes in the DM: kept in its history, and pushed as an
        `events_api` envelope while a socket is connected and `deliver`; its ts."""
        ts = self.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "channel_type": "im",
            "user": user,
            "team": team,
            "text": text,
            "ts": ts,
        }
        if thread:
            event["thread_ts"] = thread
        if channel == DM:
            with self._lock:
                self.history.append(dict(event))
        if deliver:
            envelope_id = f"env-{next(self._envelopes)}"
            self._push(
                {
                    "type": "events_api",
                    "envelope_id": envelope_id,
                    "accepts_response_payload": False,
                    "retry_attempt": 0,
                    "payload": {
                        "type": "event_callback",
                        "team_id": team,
                        "event_id": f"Ev{envelope_id}",
                        "event": event,
                    },
                }
            )
        return ts

    def press(self, posted: Posted, value: str, *, user: str = OWNER, team: str = TEAM) -> str:
        envelope_id = f"env-{next(self._envelopes)}"
        self._push(
            {
                "type": "interactive",
                "envelope_id": envelope_id,
                "accepts_response_payload": True,
                "payload": {
                    "type": "block_actions",
                    "user": {"id": user, "team_id": team},
                    "team": {"id": team},
                    "channel": {"id": posted.channel},
                    "container": {"type": "message", "message_ts": posted.ts},
                    "message": {"ts": posted.ts, "text": posted.text, "blocks": posted.blocks},
                    "actions": [
                        {"type": "button", "value": value, "action_ts": f"{time.time():.6f}"}
                    ],
                },
            }
        )
        return envelope_id

    def redeliver(self) -> int:
        """Every unacknowledged envelope again, as Slack retries them."""
        with self._lock:
            pending = [dict(e) for e in self.unacked.values()]
        for envelope in pending:
            envelope["retry_attempt"] = int(envelope.get("retry_attempt") or 0) + 1
            envelope["retry_reason"] = "timeout"
            self._push(envelope)
        return len(pending)

    def disconnect_frame(self) -> None:
        self._push_raw({"type": "disconnect", "reason": "refresh_requested"})

    def _push_raw(self, frame: dict[str, Any]) -> None:
        async def push() -> None:
            if self._sockets:
                await self._sockets[-1].send_str(json.dumps(frame))

        self._call(push())

    def drop(self) -> None:
        """Close every socket without a word (a network failure, as the client sees it)."""

        async def drop() -> None:
            for ws in list(self._sockets):
                await ws.close()

        self._call(drop())

    def texts(self) -> list[str]:
        with self._lock:
            return [p.text for p in self.posted]
