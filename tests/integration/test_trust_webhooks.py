"""The webhook listener's `tolerance_seconds` is what decides a stale request, through
`pfar run` (the signing package's own check had a fixed five minutes: a request 200 s
old was taken with a tolerance of 10 s, and one of 10 minutes refused with 900 s)."""

from __future__ import annotations

import base64
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from standardwebhooks import Webhook

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home, running_kernel, wait_for

KEY = "whsec_" + base64.b64encode(b"t" * 32).decode()
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


def _home(root: Path, port: int, tolerance: int) -> Home:
    config = f"""
[channels]
directory = "{root}"
[channels.webhooks]
port = {port}
tolerance_seconds = {tolerance}
[[channels.webhooks.routes]]
path = "/hooks/raw"
template = "triage"
secrets = ["hook_key"]
"""
    home = make_home(root / "home", config=config, templates={"triage": NOTE}, script=SCRIPT)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("hook_key", KEY)
    store.close()
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, msg_id: str, age: timedelta) -> httpx.Response:
    body = f"event {msg_id}"
    at = datetime.now(UTC) - age
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(KEY).sign(msg_id, at, body),
    }
    return httpx.post(f"http://127.0.0.1:{port}/hooks/raw", content=body, headers=headers)


def _taking(port: int) -> bool:
    try:
        return _post(port, "probe", timedelta(0)).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_short_tolerance_refuses_what_the_fixed_five_minutes_took(tmp_path: Path) -> None:
    port = _free_port()
    home = _home(tmp_path, port, tolerance=10)
    with running_kernel(home) as kernel:
        wait_for(lambda: _taking(port), what="the listener taking events")
        old = _post(port, "old", timedelta(seconds=200))
        assert old.status_code == 401, old.text
        assert "200 s old; tolerance_seconds is 10" in old.json()["error"]
        ahead = _post(port, "ahead", -timedelta(seconds=200))
        assert ahead.status_code == 401, ahead.text
        fresh = _post(port, "fresh", timedelta(seconds=3))
        assert fresh.status_code == 200, fresh.text
    assert "tolerance_seconds is 10" in kernel.output()


def test_a_long_tolerance_takes_what_the_fixed_five_minutes_refused(tmp_path: Path) -> None:
    port = _free_port()
    home = _home(tmp_path, port, tolerance=900)
    with running_kernel(home):
        wait_for(lambda: _taking(port), what="the listener taking events")
        late = _post(port, "late", timedelta(minutes=10))
        assert late.status_code == 200, late.text
        too_late = _post(port, "too-late", timedelta(minutes=20))
        assert too_late.status_code == 401, too_late.text
