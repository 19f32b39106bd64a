"""Webhooks: an HTTP listener whose routes turn signed events into tasks (seed 000 §8).

Starlette on uvicorn (the web console will share the app). Each route names a
template (or "loop") and the vault secrets holding its Standard Webhooks signing keys
(several while one is rotated). A request is checked before anything is done with it:

* a body over `max_body_bytes` is refused with 413 (read no further);
* `webhook-id`, `webhook-timestamp` (within `tolerance_seconds` of now) and
  `webhook-signature` are checked by the `standardwebhooks` package against each of
  the route's keys: anything else is 401;
* while the kernel does not take new work the answer is 503 with `Retry-After`, so the
  sender's own retries deliver the event later: `pfar run` opens the listener before
  recovery (`listen_early`), and it answers 503 until recovery has finished and the
  channel is running, and again while the kernel shuts down.

The webhook id is the event id: the task is created exactly once, and a sender that
retries an event it already delivered gets 200 with the same task. Every refusal is
logged and audited with its reason, never with the body.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any, ClassVar

from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..config import Config, WebhookRoute, WebhooksConfig
from ..errors import PfarError
from .channel import AuthFailed, Link, Outbound
from .listener import Gone, Listener, TooLarge, read_body
from .run import FACTORIES

log = logging.getLogger("pfar.adapters.webhooks")

RETRY_AFTER = "5"


class WebhooksChannel:
    name: ClassVar[str] = "webhooks"
    receives_messages: ClassVar[bool] = False

    def __init__(self, config: WebhooksConfig, secret: Any, directory: str) -> None:
        self._config = config
        self._secret = secret
        self._directory = directory
        # the channel's link once the supervisor runs it: until then (recovery) every
        # event is answered 503, so that its sender delivers it again later
        self._link: Link | None = None
        self._listener = Listener(
            self.app(),
            config.host,
            config.port,
            max_connections=config.max_connections,
            request_timeout=config.request_timeout_seconds,
        )

    def app(self, link: Link | None = None) -> Starlette:
        """The listener's routes, with `link` (by default the running channel's)."""
        routes = [
            Route(r.path, self._endpoint(r, link), methods=["POST"]) for r in self._config.routes
        ]
        return Starlette(routes=routes)

    async def listen_early(self) -> None:
        """Listen before the kernel has recovered (answering 503 until it has). A port
        that cannot be had now is logged; the channel's own start tries it again."""
        try:
            await self._listener.start()
        except OSError as exc:
            log.error("webhooks: cannot listen before recovery: %s", exc)

    @property
    def port(self) -> int | None:
        return self._listener.port

    async def run(self, link: Link) -> None:
        for route in self._config.routes:
            self._keys(route)  # a key missing from the vault is refused now, not at an event
        try:
            port = await self._listener.start()
            self._link = link
            await link.save_position({"host": self._config.host, "port": port}, [])
            log.info("webhooks listening on %s:%d", self._config.host, port)
            link.ready()
            await self._listener.wait()
        finally:
            self._link = None
            await self._listener.stop()

    def _keys(self, route: WebhookRoute) -> list[Webhook]:
        found = []
        for name in route.secrets:
            value = self._secret(name)
            if value is None:
                raise AuthFailed(
                    f"route {route.path}: no signing key in the vault (secret {name!r})",
                    f"`pfar secret set {name}` with the sender's signing secret (whsec_...)",
                )
            found.append(Webhook(value))
        return found

    def _endpoint(self, route: WebhookRoute, link: Link | None) -> Any:
        async def receive(request: Request) -> JSONResponse:
            return await self._receive(link or self._link, route, request)

        return receive

    async def _receive(
        self, link: Link | None, route: WebhookRoute, request: Request
    ) -> JSONResponse:
        def refuse(status: int, why: str, **headers: str) -> JSONResponse:
            log.warning("webhooks %s: refused (%d): %s", route.path, status, why)
            if link is not None:
                link.audit("webhook_refused", route=route.path, status=status, why=why)
            return JSONResponse({"error": why}, status_code=status, headers=headers or None)

        try:
            body = await read_body(request, self._config.max_body_bytes)
        except TooLarge:
            return refuse(413, f"the body is over {self._config.max_body_bytes} bytes")
        except Gone:  # hung up or cut off as too slow: no one reads an answer
            log.info("webhooks %s: the sender left before its body was read", route.path)
            return JSONResponse({"error": "gone"}, status_code=400)
        if link is None or not link.operator.accepting:
            return refuse(
                503, "pfar is starting or stopping; retry", **{"Retry-After": RETRY_AFTER}
            )
        headers = {k.lower(): v for k, v in request.headers.items()}
        webhook_id = headers.get("webhook-id", "")
        if not webhook_id or len(webhook_id) > 200:
            return refuse(400, "no webhook-id header")
        try:
            keys = self._keys(route)
        except AuthFailed as exc:
            return refuse(500, str(exc))
        if not any(_verified(key, body, headers) for key in keys):
            return refuse(401, "the signature or timestamp does not verify")
        stale = _stale(headers, self._config.tolerance_seconds)
        if stale is not None:
            return refuse(401, stale)
        try:
            text = _text(route, body)
        except ValueError as exc:
            return refuse(422, str(exc))
        event_id = f"webhook:{route.path}:{webhook_id}"
        try:
            if route.template == "loop":
                task = await link.operator.start_loop(
                    text, self._directory, event_id=event_id, adapter="webhooks"
                )
            else:
                task = await link.operator.submit(
                    route.template, text, event_id=event_id, adapter="webhooks"
                )
        except PfarError as exc:
            return refuse(409 if "event" in type(exc).__name__.lower() else 422, str(exc))
        return JSONResponse({"task_id": task.task_id, "state": task.state.value})

    async def send(self, message: Outbound) -> str | None:
        return None  # inbound only: no owner message is ever routed here

    async def close(self) -> None:
        await self._listener.stop()


def _verified(key: Webhook, body: bytes, headers: dict[str, str]) -> bool:
    """The body, id and timestamp are signed with `key` (one of the header's `v1,`
    signatures fits). The timestamp's age is `_stale`'s: the package's own check has a
    fixed five minutes. Anything unreadable (a body that is not UTF-8, a header that is
    no number or no base64) is simply not verified."""
    try:
        at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        signed = key.sign(headers["webhook-id"], at, body.decode())
        expected = base64.b64decode(signed.partition(",")[2])
        for given in headers["webhook-signature"].split(" "):
            version, _, signature = given.partition(",")
            if version == "v1" and hmac.compare_digest(
                expected, base64.b64decode(signature, validate=True)
            ):
                return True
    except (ValueError, KeyError, TypeError, OverflowError, OSError):
        return False
    return False


def _stale(headers: dict[str, str], tolerance: int) -> str | None:
    """Why the `webhook-timestamp` is too far from now (a replay), or None."""
    try:
        off = int(headers["webhook-timestamp"]) - int(time.time())
    except (ValueError, KeyError):
        return "the webhook-timestamp is no number"
    if abs(off) <= tolerance:
        return None
    when = f"{-off} s old" if off < 0 else f"{off} s in the future"
    return f"the webhook-timestamp is {when}; tolerance_seconds is {tolerance}"


def _text(route: WebhookRoute, body: bytes) -> str:
    """The task's text from the body: all of it, or the string a JSON pointer names."""
    raw = body.decode("utf-8", errors="replace")
    if route.text == "body":
        if not raw.strip():
            raise ValueError("the body is empty")
        return raw
    try:
        found: Any = json.loads(raw)
    except ValueError:
        raise ValueError("the body is not JSON, and the route reads a JSON pointer") from None
    for part in route.text.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            raise ValueError(f"the body has nothing at {route.text}")
    if not isinstance(found, str) or not found.strip():
        raise ValueError(f"{route.text} is not text")
    return found


def _factory(config: Config, secret: Any) -> WebhooksChannel:
    section = config.channels.webhooks
    assert section is not None
    return WebhooksChannel(section, secret, config.channels.directory)


FACTORIES["webhooks"] = _factory
