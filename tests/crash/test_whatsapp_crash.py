"""The WhatsApp channel across SIGKILLs of a real kernel process: killed after the task a
message created, or after the channel's position, before Meta got its 200; Meta
delivers the notification again after the restart, and the message is handled once."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.whatsapp_server import (
    APP_SECRET,
    OWNER,
    PHONE_ID,
    TOKEN,
    VERIFY_TOKEN,
    GraphApi,
    Meta,
)
from ..support import KernelProcess, make_home, wait_for
from .channel_support import delivery_counts, prompts, sent_remote_ids, settled
from .test_regressions import kernel

pytestmark = pytest.mark.crash


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _home(tmp_path: Path, api: GraphApi, port: int) -> Home:
    work = tmp_path / "work"
    work.mkdir()
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.whatsapp]
owner_number = "{OWNER}"
phone_number_id = "{PHONE_ID}"
api_url = "{api.url}"
port = {port}
[loop]
tools = ["file.read"]
"""
    script = '[[turns]]\ntext = "noted: $input"\n'
    home = make_home(tmp_path / "home", config=config, script=script)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("whatsapp_token", TOKEN)
    store.set("whatsapp_app_secret", APP_SECRET)
    store.set("whatsapp_verify_token", VERIFY_TOKEN)
    store.close()
    return home


def _deliver(meta: Meta, *messages: dict[str, object]) -> int | None:
    """Meta's delivery: its status, or None when the kernel died before answering."""
    try:
        return meta.deliver_from_here(*messages).status_code
    except httpx.TransportError:
        return None


def _taken(meta: Meta, *messages: dict[str, object]) -> None:
    """Delivered until answered 200, as Meta retries (a listener still starting is 503)."""
    wait_for(lambda: _deliver(meta, *messages) == 200, what="a 200 for the notification")


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["task_created", "adapter_position"])
def test_a_message_is_handled_once_whichever_commit_the_kill_came_after(
    tmp_path: Path, point: str
) -> None:
    api = GraphApi()
    try:
        port = _free_port()
        home = _home(tmp_path, api, port)
        meta = Meta(f"http://127.0.0.1:{port}/whatsapp")
        one, two = meta.message("message one"), meta.message("message two")
        k = KernelProcess(home, fault=point)
        try:
            k.wait_ready()
            status = _deliver(meta, one, two)
            assert k.killed_by_fault(), k.output()
        finally:
            k.kill()
        assert status is None  # the kill came before Meta's 200: Meta will retry
        with kernel(home) as k:
            _taken(meta, one, two)  # Meta's retry of the same notification
            wait_for(lambda: len(prompts(home)) == 2, what="two tasks")
            k.request("wait_idle")
            wait_for(
                lambda: len([t for t in api.texts() if "noted: message" in t]) == 2,
                what="both tasks' answers",
            )
        assert prompts(home) == ["message one", "message two"]  # each once
        answers = [t for t in api.texts() if "noted: message" in t]
        assert len(answers) == 2, answers  # each task's answer sent once
        assert any("noted: message one" in t for t in answers), answers
    finally:
        api.close()


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["channel_sending", "channel_sent"])
def test_a_message_to_the_owner_is_never_sent_twice(tmp_path: Path, point: str) -> None:
    api = GraphApi()
    try:
        home = _home(tmp_path, api, _free_port())
        # killed at its first delivery, which may come before it answers on its socket
        assert KernelProcess(home, fault=point).killed_by_fault()
        before = len(api.sent)
        assert before == (1 if point == "channel_sent" else 0)
        with kernel(home) as k:
            wait_for(lambda: len(api.sent) > before, what="the second start's report")
            k.request("wait_idle")
            wait_for(lambda: settled(home), what="every delivery settled")
        counts = delivery_counts(home)
        # each delivery once
        assert sent_remote_ids(home, "whatsapp") == sorted(s.id for s in api.sent), counts
        assert counts.get("in_doubt", 0) == (1 if point == "channel_sending" else 0), counts
    finally:
        api.close()
