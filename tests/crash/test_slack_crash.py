"""The Slack channel across SIGKILLs of a real kernel process: at every ingress journal
point (the task a message created, the channel's position) and at every delivery
journal point (`sending`, `sent`). No message of the owner is lost or handled twice;
no message to the owner is posted twice, and one cut off while being sent is counted
in the next recovery report instead of being sent blind."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.slack_server import APP_TOKEN, BOT_TOKEN, OWNER, TEAM, SlackApi
from ..support import KernelProcess, make_home, wait_for
from .channel_support import delivery_counts, prompts, sent_remote_ids, settled
from .test_regressions import kernel

pytestmark = pytest.mark.crash


def _home(tmp_path: Path, api: SlackApi) -> Home:
    work = tmp_path / "work"
    work.mkdir()
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.slack]
owner_user_id = "{OWNER}"
owner_team_id = "{TEAM}"
api_url = "{api.url}"
ping_interval_seconds = 0.2
[loop]
tools = ["file.read"]
"""
    script = '[[turns]]\ntext = "noted: $input"\n'
    home = make_home(tmp_path / "home", config=config, script=script)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("slack_bot_token", BOT_TOKEN)
    store.set("slack_app_token", APP_TOKEN)
    store.close()
    return home


def _connected(api: SlackApi, hellos: int) -> None:
    wait_for(lambda: api.hellos >= hellos, what=f"connection {hellos}")


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["task_created", "task_created:2", "adapter_position"])
def test_an_owner_message_is_handled_once_whichever_commit_the_kill_came_after(
    tmp_path: Path, point: str
) -> None:
    api = SlackApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            _connected(api, 1)
            api.say("message one")
            wait_for(lambda: prompts(home) == ["message one"], what="the first task")
            wait_for(lambda: not api.unacked, what="the first ack")
            k.kill()
        with kernel(home, fault=point) as k:
            _connected(api, 2)
            api.say("message two")
            api.say("message three")
            assert k.killed_by_fault(), k.output()
        # while the kernel is down, the owner writes on; Slack cannot deliver it
        api.say("message four", deliver=False)
        with kernel(home) as k:
            _connected(api, 3)
            api.redeliver()  # Slack retries what was never acknowledged
            wait_for(lambda: len(prompts(home)) == 4, what="four tasks")
            wait_for(lambda: not api.unacked, what="every envelope acknowledged")
            k.request("wait_idle")
        assert sorted(prompts(home)) == [
            "message four",
            "message one",
            "message three",
            "message two",
        ]  # each message once: none lost, none twice
    finally:
        api.close()


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["channel_sending", "channel_sent"])
def test_a_message_to_the_owner_is_never_posted_twice(tmp_path: Path, point: str) -> None:
    api = SlackApi()
    try:
        home = _home(tmp_path, api)
        # killed at its first delivery, which may come before it answers on its socket
        assert KernelProcess(home, fault=point).killed_by_fault()
        first = [p.text for p in api.posted]
        assert len(first) == (1 if point == "channel_sent" else 0)
        with kernel(home) as k:
            wait_for(lambda: len(api.posted) > len(first), what="the second start's report")
            k.request("wait_idle")
            wait_for(lambda: settled(home), what="every delivery settled")
        counts = delivery_counts(home)
        # every post is one delivery's, each delivery posted once: nothing posted twice
        assert sent_remote_ids(home, "slack") == sorted(p.ts for p in api.posted), counts
        assert counts.get("in_doubt", 0) == (1 if point == "channel_sending" else 0), counts
        texts = [p.text for p in api.posted]
        if point == "channel_sending":
            # cut off between `sending` and the call: in doubt, said so, not sent again
            assert any("cut off while being sent" in t for t in texts), texts
        else:
            assert not any("cut off while being sent" in t for t in texts), texts
    finally:
        api.close()
