"""The Socket Mode connection: the SDK's client feeding pfar's inbox, and how long it was
down before its latest hello (a long gap calls for a catch-up)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient

# what the client puts in the inbox: an envelope, or None when a connection said hello
Inbox = asyncio.Queue[SocketModeRequest | None]


def socket_client(
    app_token: str, web: AsyncWebClient, url: str, ping_interval: float, inbox: Inbox
) -> SocketModeClient:
    """The Socket Mode client for `url`, putting each envelope and each hello in `inbox`."""
    client = SocketModeClient(
        app_token,
        web_client=web,
        ping_interval=ping_interval,
        logger=logging.getLogger("pfar.adapters.slack.socket"),
    )
    client.wss_uri = url

    async def hello(_client: Any, message: dict[str, Any], _raw: str | None) -> None:
        if message.get("type") == "hello":
            await inbox.put(None)

    async def request(_client: Any, req: SocketModeRequest) -> None:
        await inbox.put(req)

    client.message_listeners.append(hello)
    client.socket_mode_request_listeners.append(request)
    return client


class Downtime:
    """How long the Socket Mode connection was down before its latest hello."""

    def __init__(self) -> None:
        self._since: float | None = None

    async def watch(self, client: SocketModeClient, every: float) -> None:
        while True:
            connected = await client.is_connected()
            if not connected and self._since is None:
                self._since = time.monotonic()
            await asyncio.sleep(min(1.0, every))

    def reconnected(self) -> float:
        since, self._since = self._since, None
        return 0.0 if since is None else time.monotonic() - since
