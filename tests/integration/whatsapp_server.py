"""A loopback WhatsApp Cloud API: the Graph API endpoints pfar's WhatsApp channel uses
(`GET /{phone-number-id}`, `POST /{phone-number-id}/messages`) with Meta's JSON shapes
and errors, and Meta's side of the webhooks: notifications in the Cloud API's shape,
signed with the app secret (`X-Hub-Signature-256`), posted to pfar's listener.

It runs on its own event loop in a thread, so a kernel in another process or on the
test's own loop can use it alike. `fail_next` answers the next call of a path with an
error (a 429, an expired token's 401 with code 190, ...).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

TOKEN = "EAAG-loopback-access-token"
APP_SECRET = "loopback-app-secret"
VERIFY_TOKEN = "loopback-verify-token"
OWNER = "4915112345678"
PHONE_ID = "106540352242922"


def sign(body: bytes, secret: str = APP_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Sent:
    id: str
    payload: dict[str, Any]

    @property
    def text(self) -> str:
        if self.payload.get("type") == "text":
            return str(self.payload["text"]["body"])
        return str(self.payload["interactive"]["body"]["text"])

    def answers(self) -> list[tuple[str, str]]:
        """(id, title) of each button or list row."""
        interactive = self.payload.get("interactive") or {}
        action = interactive.get("action") or {}
        if interactive.get("type") == "button":
            return [(b["reply"]["id"], b["reply"]["title"]) for b in action["buttons"]]
        if interactive.get("type") == "list":
            return [(r["id"], r["title"]) for s in action["sections"] for r in s["rows"]]
        return []


@dataclass
class GraphApi:
    token: str = TOKEN
    sent: list[Sent] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    failures: dict[str, deque[tuple[int, dict[str, Any], dict[str, str]]]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/v21.0/{path:.*}", self._graph)
        self._runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v21.0"
        started.set()
        self.loop.run_forever()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def fail_next(
        self, path: str, status: int, error: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        with self._lock:
            self.failures.setdefault(path, deque()).append((status, error, headers or {}))

    async def _graph(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        with self._lock:
            self.calls.append((request.method, path))
            failing = self.failures.get(path)
            failure = failing.popleft() if failing else None
        if failure is not None:
            status, error, headers = failure
            return web.json_response({"error": error}, status=status, headers=headers)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            error = {"message": "Error validating access token", "type": "OAuthException"}
            return web.json_response({"error": {**error, "code": 190}}, status=401)
        if request.method == "GET" and path == PHONE_ID:
            return web.json_response({"id": PHONE_ID, "display_phone_number": "+1 555 0100"})
        if request.method == "POST" and path == f"{PHONE_ID}/messages":
            payload = await request.json()
            wamid = f"wamid.out{next(self._ids)}"
            with self._lock:
                self.sent.append(Sent(wamid, payload))
            return web.json_response(
                {
                    "messaging_product": "whatsapp",
                    "contacts": [{"input": payload["to"], "wa_id": payload["to"]}],
                    "messages": [{"id": wamid}],
                }
            )
        error = {"message": "Unknown path", "type": "GraphMethodException", "code": 100}
        return web.json_response({"error": error}, status=400)

    def texts(self) -> list[str]:
        with self._lock:
            return [s.text for s in self.sent]


class Meta:
    """Meta's side: notifications posted to pfar's listener, signed like Meta's."""

    def __init__(self, url: str, secret: str = APP_SECRET) -> None:
        self.url = url
        self.secret = secret
        self._ids = itertools.count(1)

    def message(
        self,
        text: str | None = None,
        *,
        sender: str = OWNER,
        context: str | None = None,
        reply_id: str | None = None,
        list_reply: bool = False,
        wamid: str | None = None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "from": sender,
            "id": wamid or f"wamid.in{next(self._ids)}",
            "timestamp": str(int(time.time())),
        }
        if reply_id is not None:
            kind = "list_reply" if list_reply else "button_reply"
            message["type"] = "interactive"
            message["interactive"] = {"type": kind, kind: {"id": reply_id, "title": "x"}}
        else:
            message["type"] = "text"
            message["text"] = {"body": text or ""}
        if context is not None:
            message["context"] = {"from": "15550100", "id": context}
        return message

    @staticmethod
    def notification(*messages: dict[str, Any]) -> dict[str, Any]:
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102290129340398",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {"phone_number_id": PHONE_ID},
                                "contacts": [{"wa_id": m.get("from")} for m in messages],
                                "messages": list(messages),
                            },
                        }
                    ],
                }
            ],
        }

    def _headers(self, body: bytes, signature: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if signature == "sign":
            headers["X-Hub-Signature-256"] = sign(body, self.secret)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        return headers

    async def post(self, body: bytes, signature: str | None = "sign") -> httpx.Response:
        """From a test that shares its event loop with the kernel."""
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(self.url, content=body, headers=self._headers(body, signature))

    async def deliver(self, *messages: dict[str, Any]) -> httpx.Response:
        return await self.post(json.dumps(self.notification(*messages)).encode())

    def deliver_from_here(self, *messages: dict[str, Any]) -> httpx.Response:
        """From a test whose kernel is another process."""
        body = json.dumps(self.notification(*messages)).encode()
        return httpx.post(self.url, content=body, headers=self._headers(body, "sign"), timeout=10)
