"""Slack under a server error, through a real kernel and slack_sdk against the loopback
Web API: a 5xx on chat.postMessage is retried on the channel's backoff (Slack asks
clients to retry), not dropped as refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from .channel_support import kernel_with_channels, until
from .slack_server import SlackApi
from .test_slack import slack_home


@pytest.fixture
def api() -> Iterator[SlackApi]:
    server = SlackApi()
    try:
        yield server
    finally:
        server.close()


def test_a_5xx_is_retried_and_the_message_posted_once(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)
    api.fail_next("chat.postMessage", 503, {"ok": False, "error": "service_unavailable"})

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: api.posted, "the start report after the 503")
            for _ in range(500):  # its `sent` committed
                if set(await kernel.journal.adapters.delivery_counts("slack")) == {"sent"}:
                    break
                await asyncio.sleep(0.01)
            assert set(await kernel.journal.adapters.delivery_counts("slack")) == {"sent"}
        posts = [c for c in api.calls if c[0] == "chat.postMessage"]
        assert len(posts) == 2 and len(api.posted) == 1  # refused, then posted once

    asyncio.run(body())
