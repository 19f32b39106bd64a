"""Slack (seed 000 §8): a Slack app in Socket Mode, talking in the owner's DM.

`slack_sdk` is the client: its `AsyncWebClient` for the Web API and its aiohttp
`SocketModeClient` for the WebSocket (hello, envelopes, disconnect frames and
reconnection, pings). What it does not do, pfar does:

* **exactly once**: an envelope is acknowledged only after its effect is committed,
  so Slack delivers an unacknowledged one again, and the same message (by its channel
  and `ts`, which retries and history share) or button press finds its first effect
  and makes no second one;
* **in order**: envelopes are handled one at a time, in the order they arrived;
* **catch-up**: after a start, or a connection that was down longer than
  `catch_up_after_seconds`, `conversations.history` of the owner's DM since the last
  message handled brings in what Slack gave up redelivering;
* **only the owner**: a message or a button press counts only from `owner_user_id` in
  `owner_team_id`; anything else is ignored, audited and logged with the reason;
* **never twice**: the Web API client retries nothing by itself (a retried
  `chat.postMessage` after a lost response could post twice); a 429 is waited out
  by the supervisor with Slack's `Retry-After`.

The modules: `channel` (the channel itself: envelopes in, messages out),
`socket_mode` (the WebSocket client and how long it was down), `catch_up` (the DM's
history since the last message handled), `blocks` (the Block Kit pfar posts) and
`web_errors` (Web API errors as channel errors). Importing the package registers the
channel with `run`.
"""

from __future__ import annotations

from typing import Any

from ...config import Config
from ..run import FACTORIES
from .blocks import SECTION_TEXT, chunks, escape
from .channel import SlackChannel


def _factory(config: Config, secret: Any) -> SlackChannel:
    section = config.channels.slack
    assert section is not None  # only enabled channels are built
    return SlackChannel(section, secret)


FACTORIES["slack"] = _factory

__all__ = ["SECTION_TEXT", "SlackChannel", "chunks", "escape"]
