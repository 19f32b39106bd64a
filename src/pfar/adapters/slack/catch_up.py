"""The owner's DM since the last message handled: what Slack gave up redelivering."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient


async def messages_since(web: AsyncWebClient, dm: str, oldest: str) -> list[dict[str, Any]]:
    """The DM's messages after `oldest` (a ts), all pages of them, oldest first."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await web.conversations_history(
            channel=dm, oldest=oldest, inclusive=False, limit=200, cursor=cursor
        )
        found += [m for m in page.get("messages") or [] if isinstance(m, dict)]
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not page.get("has_more") or not cursor:
            break
    found.sort(key=lambda m: float(m.get("ts", "0")))
    return found
