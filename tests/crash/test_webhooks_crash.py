"""Webhooks across a SIGKILL of a real kernel process: killed right after the task an
event created was committed (its sender got no answer), the sender's retry after the
restart gets the same task, and no second one is created."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.test_webhooks import KEY, NOTE, SCRIPT, _signed
from ..support import KernelProcess, make_home, read_journal, tasks_in_order, wait_for
from .test_regressions import kernel

pytestmark = pytest.mark.crash


def _home(tmp_path: Path) -> Home:
    config = f"""
[channels]
directory = "{tmp_path}"
[channels.webhooks]
port = 0
[[channels.webhooks.routes]]
path = "/hooks/issues"
template = "triage"
secrets = ["hook_key"]
text = "/issue/title"
"""
    home = make_home(tmp_path / "home", config=config, templates={"triage": NOTE}, script=SCRIPT)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("hook_key", KEY)
    store.close()
    return home


def _port(home: Home, other_than: int | None = None) -> int:
    def found() -> int | None:
        got = read_journal(home, lambda s: s.adapters.get("webhooks"))
        port = got.get("port") if got else None
        return int(port) if isinstance(port, int) and port != other_than else None

    return int(wait_for(found, what="the listener's port"))


def _post(port: int, body: str, msg_id: str) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/hooks/issues",
        content=body,
        headers=_signed(KEY, body, msg_id),
        timeout=10,
    )


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["task_created", "completed"])
def test_an_event_whose_answer_a_kill_cut_off_is_one_task_after_the_retry(
    tmp_path: Path, point: str
) -> None:
    home = _home(tmp_path)
    event = json.dumps({"issue": {"title": "The build is red"}})
    k = KernelProcess(home, fault=point)
    try:
        k.wait_ready()
        first_port = _port(home)
        try:
            answer = _post(first_port, event, "msg_1")
            cut_off = point == "completed" and answer.status_code == 200
        except httpx.TransportError:
            cut_off = True  # no answer: the sender will retry
        assert k.killed_by_fault(), k.output()
    finally:
        k.kill()
    assert cut_off or point == "completed"
    with kernel(home) as k:
        port = _port(home, other_than=first_port)
        again = _post(port, event, "msg_1")  # the sender's retry
        assert again.status_code == 200, again.text
        k.request("wait_idle")
    tasks = tasks_in_order(home)
    assert [t.event_id for t in tasks] == ["webhook:/hooks/issues:msg_1"]
    assert again.json()["task_id"] == tasks[0].task_id
    assert tasks[0].state == "Completed"
