"""A signed WhatsApp notification replayed after its message id was forgotten (the
journal's cleanup drops inbound event ids after `journal_retention_completed_hours`)
made a second task: a message older than that window is now refused, through `pfar
run` with Meta and the Graph API on loopback."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import db, make_home, running_kernel, wait_for
from .whatsapp_server import APP_SECRET, OWNER, PHONE_ID, TOKEN, VERIFY_TOKEN, GraphApi, Meta

SCRIPT = """
[[responses]]
phase = "plan"
json = { steps = [] }

[[responses]]
phase = "synthesize"
text = "done"
"""
NOTE = """
id = "triage"
description = "Triage"
allowed_tools = []
"""


@pytest.fixture
def api() -> Iterator[GraphApi]:
    server = GraphApi()
    try:
        yield server
    finally:
        server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _home(tmp_path: Path, api: GraphApi, port: int) -> Home:
    config = f"""
[recovery]
journal_retention_completed_hours = 2
[channels]
directory = "{tmp_path}"
on_message = "triage"
[channels.whatsapp]
owner_number = "{OWNER}"
phone_number_id = "{PHONE_ID}"
api_url = "{api.url}"
port = {port}
"""
    home = make_home(tmp_path / "home", config=config, templates={"triage": NOTE}, script=SCRIPT)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("whatsapp_token", TOKEN)
    store.set("whatsapp_app_secret", APP_SECRET)
    store.set("whatsapp_verify_token", VERIFY_TOKEN)
    store.close()
    return home


def _texts(home: Home) -> list[str]:
    conn = db(home)
    try:
        rows = conn.execute("SELECT trigger_event FROM task_journal").fetchall()
    finally:
        conn.close()
    return [str(r[0]) for r in rows]


def test_a_replay_older_than_the_dedup_window_makes_no_task(tmp_path: Path, api: GraphApi) -> None:
    port = _free_port()
    home = _home(tmp_path, api, port)
    meta = Meta(f"http://127.0.0.1:{port}/whatsapp")
    with running_kernel(home) as kernel:
        fresh = meta.message("a fresh message")
        wait_for(lambda: meta.deliver_from_here(fresh).status_code == 200, what="the listener")
        wait_for(lambda: any("a fresh message" in t for t in _texts(home)), what="its task")
        # a correctly signed notification from three hours ago, whose id pfar no longer
        # knows (the window is 2 h here): Meta gets its 200, and nothing is done
        replay = meta.message("a replayed message", wamid="wamid.replayed")
        replay["timestamp"] = str(int(time.time()) - 3 * 3600)
        assert meta.deliver_from_here(replay).status_code == 200
        # one within the window is still taken
        recent = meta.message("a recent message")
        recent["timestamp"] = str(int(time.time()) - 3600)
        assert meta.deliver_from_here(recent).status_code == 200
        wait_for(lambda: any("a recent message" in t for t in _texts(home)), what="its task")
        # handled in order, each before Meta's 200: the replay made no task
        assert not any("a replayed message" in t for t in _texts(home))
        wait_for(lambda: "wamid.replayed" in kernel.output(), what="the refusal's log line")
    out = kernel.output()
    assert "ignored message wamid.replayed: sent 108" in out  # 10,800 s and a moment
    assert "a replayed notification?" in out
