"""The WhatsApp channel: signed notifications from Meta handled once each, in order, and
messages to the owner written through the Graph API."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ...config import WhatsAppConfig
from ...journal.message_keys import MessageKind
from ..channel import (
    AuthFailed,
    ChannelDown,
    ChannelError,
    Link,
    Outbound,
    Press,
    RateLimited,
    field_dict,
    queue_reply,
)
from ..commands import Origin, press
from ..listener import Gone, Listener, TooLarge, read_body
from .graph_errors import graph_failure
from .notifications import age, messages_in, verified
from .payloads import payloads

log = logging.getLogger("pfar.adapters.whatsapp")

RETRY_AFTER = "5"

MIN_WINDOW = 600.0  # seconds: the shortest age past which a message is refused


class WhatsAppChannel:
    name: ClassVar[str] = "whatsapp"
    receives_messages: ClassVar[bool] = True

    def __init__(
        self,
        config: WhatsAppConfig,
        secret: Callable[[str], str | None],
        *,
        max_age: float = 24 * 3600.0,
    ) -> None:
        self._config = config
        # a message older than this is refused: its id may be forgotten by now (journal
        # cleanup), so a signed notification replayed later would make a second task
        self._max_age = max_age
        self._secret = secret  # read when used: the vault opens during the kernel's start
        # the running channel's link: until it is set (recovery), notifications get 503
        self._link: Link | None = None
        self._listener = Listener(
            self.app(),
            config.host,
            config.port,
            max_connections=config.max_connections,
            request_timeout=config.request_timeout_seconds,
        )
        self._http: httpx.AsyncClient | None = None
        self._refused: asyncio.Event = asyncio.Event()
        self._refusal: AuthFailed | None = None
        self._one_at_a_time = asyncio.Lock()

    # -- secrets and the Graph API ---------------------------------------------------

    def _read(self, name: str) -> str:
        value = self._secret(name)
        if value is None:
            raise AuthFailed(
                f"no WhatsApp secret in the vault (secret {name!r})",
                f"`pfar secret set {name}` (docs/whatsapp.md says where to find it)",
            )
        return value

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(30, connect=10))
        return self._http

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._read(self._config.token_secret)}"}

    async def _graph(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One Graph API call; its JSON. Errors as channel errors (never with the token)."""
        url = f"{self._config.api_url.rstrip('/')}/{path}"
        try:
            response = await self._client().request(method, url, json=body, headers=self._headers())
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ChannelDown(f"the Graph API cannot be reached: {type(exc).__name__}") from None
        if response.status_code < 300:
            return response.json()
        failure = graph_failure(response)
        if isinstance(failure, AuthFailed):
            self._refusal = failure
            self._refused.set()  # the channel's run ends with it: degraded, owner told
        raise failure

    # -- in ------------------------------------------------------------------------

    def app(self) -> Starlette:
        path = self._config.path
        return Starlette(routes=[Route(path, self._receive, methods=["GET", "POST"])])

    @property
    def port(self) -> int | None:
        return self._listener.port

    async def listen_early(self) -> None:
        """Listen before the kernel has recovered (answering 503 until it has)."""
        try:
            await self._listener.start()
        except OSError as exc:
            log.error("whatsapp: cannot listen before recovery: %s", exc)

    async def run(self, link: Link) -> None:
        for name in (
            self._config.token_secret,
            self._config.app_secret_secret,
            self._config.verify_token_secret,
        ):
            self._read(name)  # a secret missing from the vault is refused now
        self._refused.clear()
        # the token works, and names the business number: a refused one is known now
        await self._graph("GET", self._config.phone_number_id)
        try:
            port = await self._listener.start()
            self._link = link
            log.info("whatsapp listening on %s:%d%s", self._config.host, port, self._config.path)
            link.ready()
            waits = {
                asyncio.create_task(self._listener.wait()),
                asyncio.create_task(self._refused.wait()),
            }
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
            if self._refusal is not None and self._refused.is_set():
                raise self._refusal
        finally:
            self._link = None
            await self._listener.stop()

    async def _receive(self, request: Request) -> Response:
        link = self._link

        def refuse(status: int, why: str, **headers: str) -> JSONResponse:
            log.warning("whatsapp: refused (%d): %s", status, why)
            if link is not None:
                link.audit("whatsapp_refused", status=status, why=why)
            return JSONResponse({"error": why}, status_code=status, headers=headers or None)

        if request.method == "GET":
            return self._handshake(request, refuse)
        try:
            body = await read_body(request, self._config.max_body_bytes)
        except TooLarge:
            return refuse(413, f"the body is over {self._config.max_body_bytes} bytes")
        except Gone:  # hung up or cut off as too slow: no one reads an answer
            log.info("whatsapp: the sender left before its body was read")
            return JSONResponse({"error": "gone"}, status_code=400)
        if link is None or not link.operator.accepting:
            return refuse(
                503, "pfar is starting or stopping; retry", **{"Retry-After": RETRY_AFTER}
            )
        try:
            app_secret = self._read(self._config.app_secret_secret)
        except AuthFailed as exc:
            return refuse(500, str(exc))
        if not verified(app_secret, body, request.headers.get("x-hub-signature-256")):
            return refuse(401, "the X-Hub-Signature-256 signature does not verify")
        try:
            notification = json.loads(body)
        except ValueError:
            return refuse(400, "the body is not JSON")
        messages = list(messages_in(notification))
        async with self._one_at_a_time:  # in the order Meta sent them, each once
            for message in messages:
                try:
                    await self._message(link, message)
                except ChannelError as exc:
                    log.error("whatsapp: a message could not be handled: %s", exc)
        return JSONResponse({"ok": True})

    def _handshake(self, request: Request, refuse: Callable[..., JSONResponse]) -> Response:
        """Meta's subscription check: the challenge echoed for the right verify token."""
        query = request.query_params
        try:
            expected = self._read(self._config.verify_token_secret)
        except AuthFailed as exc:
            return refuse(500, str(exc))
        given = query.get("hub.verify_token") or ""
        if query.get("hub.mode") != "subscribe" or not hmac.compare_digest(
            given.encode(), expected.encode()
        ):
            return refuse(403, "the subscription's verify token does not match")
        return PlainTextResponse(query.get("hub.challenge") or "")

    async def _message(self, link: Link, message: dict[str, Any]) -> None:
        wamid, sender, kind = message.get("id"), message.get("from"), message.get("type")
        if not isinstance(wamid, str) or not wamid or len(wamid) > 200:
            link.audit("whatsapp_ignored", why="a message without an id")
            return
        if sender != self._config.owner_number:
            log.warning("whatsapp: ignored a message from %s (not the owner)", sender)
            link.audit("whatsapp_ignored", number=str(sender), why="not the owner")
            return
        event_id = f"whatsapp:{wamid}"
        if await link.seen(event_id):
            if link.answer_lost is not None:  # a kill before its answer was queued?
                await link.answer_lost(event_id, wamid)
            return
        sent_age = age(message.get("timestamp"))
        if sent_age is None or sent_age > self._max_age:
            sent = "at no readable time" if sent_age is None else f"{sent_age:.0f} s ago"
            log.warning(
                "whatsapp: ignored message %s: sent %s, older than the %.0f s its id is "
                "remembered for (a replayed notification?)",
                wamid,
                sent,
                self._max_age,
            )
            link.audit("whatsapp_ignored", message_id=wamid, why=f"too old: sent {sent}")
            return
        if kind == "text":
            answer = await self._said(link, message, event_id)
        elif kind == "interactive":
            picked = field_dict(message, "interactive")
            reply = field_dict(picked, "button_reply") or field_dict(picked, "list_reply")
            chosen = Press.parse(reply.get("id"))
            if chosen is None:
                link.audit("whatsapp_ignored", why="unknown button")
                answer = "This button is not pfar's."
            else:
                answer = await press(link.operator, chosen.question_id, chosen.option)
        else:
            answer = "pfar reads text messages only"
        position = {"last_message_id": wamid, "timestamp": str(message.get("timestamp"))}
        await link.save_position(position, [event_id])
        # through the channel's outbox, after Meta got its 200: in order, retried on a
        # 429 or a 5xx, once; quoting the owner's message
        await queue_reply(link, answer, wamid, event_id)

    async def _said(self, link: Link, message: dict[str, Any], event_id: str) -> str:
        text = field_dict(message, "text").get("body")
        if not isinstance(text, str) or not text.strip():
            return "pfar reads text messages only"
        context = field_dict(message, "context").get("id")
        replied = await link.replied_to(context) if isinstance(context, str) else None
        key, task, kind = replied if replied else (None, None, None)
        answer = await link.handle(text, Origin("whatsapp", event_id, key, task))
        if kind is MessageKind.credential:
            answer += (
                "\n(WhatsApp lets no one delete your message through its API: delete it "
                "from the chat yourself)"
            )
        return answer

    # -- out -----------------------------------------------------------------------

    async def _post(self, payload: dict[str, Any]) -> str | None:
        sent = await self._graph("POST", f"{self._config.phone_number_id}/messages", payload)
        ids = [m.get("id") for m in sent.get("messages") or [] if isinstance(m, dict)]
        return str(ids[0]) if ids and ids[0] else None

    async def send(self, message: Outbound) -> str | None:
        last = None
        for n, payload in enumerate(payloads(self._config.owner_number, message)):
            try:
                last = await self._post(payload)
            except (RateLimited, ChannelDown, AuthFailed):
                if n == 0:
                    raise  # nothing of it went out: sent whole, later
                raise ChannelError("part of the message went out before an error") from None
        return last

    async def close(self) -> None:
        await self._listener.stop()
        if self._http is not None:
            http, self._http = self._http, None
            with contextlib.suppress(Exception):
                await http.aclose()
