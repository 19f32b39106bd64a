"""R6: the Telegram channel resumes from its last offset after a SIGKILL; no update is
lost and none is processed twice, whichever commit the kill came after (a task an
update created, the batch's offset)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.telegram_server import OWNER, TOKEN, BotApi, unescape
from ..support import make_home, wait_for
from .test_regressions import kernel, rows

pytestmark = pytest.mark.crash


def _home(tmp_path: Path, api: BotApi) -> Home:
    work = tmp_path / "work"
    work.mkdir()
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.telegram]
owner_user_id = {OWNER}
api_url = "{api.url}"
poll_timeout_seconds = 1
[loop]
tools = ["file.read"]
"""
    script = '[[turns]]\ntext = "noted: $input"\n'
    home = make_home(tmp_path / "home", config=config, script=script)
    store = SecretStore.open(home.secrets_db)
    store.set("telegram_bot_token", TOKEN)
    store.close()
    return home


def _prompts(home: Home) -> list[str]:
    found = rows(home, "SELECT trigger_event FROM task_journal ORDER BY created_at")
    return [json.loads(r["trigger_event"])["text"] for r in found]


def _offset(home: Home) -> int | None:
    found = rows(home, "SELECT state_json FROM adapter_state WHERE adapter = 'telegram'")
    return json.loads(found[0]["state_json"])["last_offset"] if found else None


@pytest.mark.parametrize("point", ["task_created:2", "adapter_position"])
def test_r6_telegram_resumes_from_its_last_offset_after_a_kill(tmp_path: Path, point: str) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            first = api.say("message one")
            wait_for(lambda: _offset(home) == first, what="the first batch's offset")
            k.kill()
        # while the kernel is down, the owner goes on writing
        ids = [api.say(f"message {n}") for n in ("two", "three", "four")]
        calls_before = len(api.calls)
        with kernel(home, fault=point) as k:
            assert k.killed_by_fault(), k.output()
        with kernel(home) as k:
            wait_for(lambda: _offset(home) == ids[-1], what="the last offset")
            wait_for(lambda: len(_prompts(home)) == 4, what="four tasks")
            k.request("wait_idle")
        polls = [p for m, p in api.calls[calls_before:] if m == "getUpdates"]
        # every start polled from the offset it had saved: never -1 (a gap) again
        assert all(int(p["offset"]) > first for p in polls), polls
        assert _prompts(home) == [
            "message one",
            "message two",
            "message three",
            "message four",
        ]  # each update once: none lost, none twice
        started = [unescape(s.text) for s in api.sent if s.reply_to is not None]
        assert len([t for t in started if "started" in t]) >= 3
    finally:
        api.close()
