"""Chat channels under ordinary faults, across a SIGKILL: a new bot killed before the
owner's first message still gets every message sent while it was down."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..integration.telegram_server import BotApi
from ..support import wait_for
from .channel_support import prompts
from .test_regressions import kernel
from .test_telegram_crash import _home, _offset

pytestmark = pytest.mark.crash


def test_a_new_bot_killed_before_the_first_message_loses_none_sent_meanwhile(
    tmp_path: Path,
) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            # first connection, nothing waits: polling from here on (the position it
            # polls from is committed before the first long poll)
            wait_for(
                lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
                what="the channel polling",
            )
            k.kill()
        ids = [api.say(f"message {n}") for n in ("one", "two", "three")]
        calls_before = len(api.calls)
        with kernel(home) as k:
            wait_for(lambda: _offset(home) == ids[-1], what="the last offset")
            wait_for(lambda: len(prompts(home)) == 3, what="three tasks")
            k.request("wait_idle")
        polls = [p for m, p in api.calls[calls_before:] if m == "getUpdates"]
        assert all(int(p["offset"]) >= 0 for p in polls), polls  # never -1 again
        assert prompts(home) == ["message one", "message two", "message three"]
    finally:
        api.close()
