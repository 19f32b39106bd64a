"""The webhooks channel through a real kernel and a real HTTP listener: a signed event is
a task exactly once; forged, replayed, stale, oversized and malformed requests are
refused with a reason and create nothing; keys rotate; 503 while pfar takes no work.
Signatures are checked against Standard Webhooks' published example and against an
independent HMAC, both ways."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook

from pfar.adapters import run as channels_run
from pfar.adapters.channel import Link
from pfar.adapters.webhooks import WebhooksChannel, _text, _verified
from pfar.config import Config, WebhookRoute
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home

KEY = "whsec_" + base64.b64encode(b"k" * 32).decode()
NEW_KEY = "whsec_" + base64.b64encode(b"n" * 32).decode()
SCRIPT = """
[[responses]]
phase = "plan"
json = { steps = [] }

[[responses]]
phase = "synthesize"
text = "triaged"
"""
NOTE = """
id = "triage"
description = "Triage an issue"
allowed_tools = ["file.write"]
"""


def _home(tmp_path: Path) -> Home:
    config = f"""
[channels]
directory = "{tmp_path}"
[channels.webhooks]
port = 0
max_body_bytes = 2048
[[channels.webhooks.routes]]
path = "/hooks/issues"
template = "triage"
secrets = ["hook_key_old", "hook_key"]
text = "/issue/title"
[[channels.webhooks.routes]]
path = "/hooks/raw"
template = "triage"
secrets = ["hook_key"]
"""
    home = make_home(tmp_path / "home", config=config, templates={"triage": NOTE}, script=SCRIPT)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("hook_key", NEW_KEY)
    store.set("hook_key_old", KEY)
    store.close()
    return home


def _signed(key: str, body: str, msg_id: str, at: datetime | None = None) -> dict[str, str]:
    at = at or datetime.now(UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(key).sign(msg_id, at, body),
        "content-type": "application/json",
    }


async def _with(home: Home, body: Callable[[Kernel, str], Awaitable[Any]]) -> Any:
    config = Config.load(home.config)
    kernel = Kernel(home, config)
    await kernel.start()
    chats = channels_run.build(config, kernel.secrets.get, str(home.config))
    task = channels_run.start(Operator(kernel), config, chats)
    try:
        for _ in range(500):
            state = await kernel.journal.adapters.get("webhooks")
            if state and kernel.channel_states["webhooks"].state == "connected":
                break
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{state['port']}"  # type: ignore[index]
        return await body(kernel, url)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kernel.shutdown()


def test_a_signed_event_is_a_task_exactly_once_and_keys_rotate(tmp_path: Path) -> None:
    home = _home(tmp_path)
    event = json.dumps({"issue": {"title": "The build is red"}})

    async def body(kernel: Kernel, url: str) -> None:
        async with httpx.AsyncClient(base_url=url) as http:
            first = await http.post(
                "/hooks/issues", content=event, headers=_signed(KEY, event, "msg_1")
            )
            assert first.status_code == 200, first.text
            again = await http.post(  # the sender retried: the same task
                "/hooks/issues", content=event, headers=_signed(KEY, event, "msg_1")
            )
            assert again.json()["task_id"] == first.json()["task_id"]
            rotated = await http.post(  # signed with the new key
                "/hooks/issues", content=event, headers=_signed(NEW_KEY, event, "msg_2")
            )
            assert rotated.status_code == 200
        tasks = await Operator(kernel).tasks()
        assert len(tasks) == 2
        row = await kernel.journal.tasks.get(first.json()["task_id"])
        assert row.trigger_event is not None and row.trigger_event["text"] == "The build is red"
        assert row.event_id == "webhook:/hooks/issues:msg_1"

    asyncio.run(_with(home, body))


def test_forged_stale_oversized_and_malformed_requests_are_refused(tmp_path: Path) -> None:
    home = _home(tmp_path)
    event = json.dumps({"issue": {"title": "x"}})
    secret_marker = "BODY-MUST-NOT-BE-LOGGED"

    async def body(kernel: Kernel, url: str) -> None:
        async with httpx.AsyncClient(base_url=url) as http:

            async def post(path: str, content: str, headers: dict[str, str]) -> int:
                return (await http.post(path, content=content, headers=headers)).status_code

            forged = _signed("whsec_" + base64.b64encode(b"z" * 32).decode(), event, "m1")
            assert await post("/hooks/issues", event, forged) == 401
            tampered = _signed(KEY, event, "m2")
            assert await post("/hooks/issues", event.replace("x", "y"), tampered) == 401
            stale = _signed(KEY, event, "m3", datetime.now(UTC) - timedelta(minutes=10))
            assert await post("/hooks/issues", event, stale) == 401
            no_id = _signed(KEY, event, "m4")
            del no_id["webhook-id"]
            assert await post("/hooks/issues", event, no_id) == 400
            big = json.dumps({"issue": {"title": secret_marker * 200}})
            assert await post("/hooks/issues", big, _signed(KEY, big, "m5")) == 413
            nothing = json.dumps({"other": 1})
            assert await post("/hooks/issues", nothing, _signed(KEY, nothing, "m6")) == 422
            raw = "plain text " + secret_marker
            assert await post("/hooks/raw", raw, _signed(KEY, raw, "m7")) == 401  # old key
            unknown = await http.post("/hooks/nope", content=event)
            assert unknown.status_code == 404
        assert await Operator(kernel).tasks() == []

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert audit.count("webhook_refused") == 7
    assert secret_marker not in audit


def test_the_listener_answers_503_before_recovery_and_the_retry_is_taken_after(
    tmp_path: Path,
) -> None:
    """As `pfar run` does: the listener opens before recovery; an event sent meanwhile is
    refused for now (503, Retry-After), and its sender's retry creates the task."""
    home = _home(tmp_path)
    config = Config.load(home.config)
    event = json.dumps({"issue": {"title": "sent during the restart"}})

    async def scene() -> None:
        kernel = Kernel(home, config)
        chats = channels_run.build(config, lambda n: kernel.secrets.get(n), "config.toml")  # noqa: PLW0108  (the vault opens in start)
        await channels_run.listen_early(chats)
        (channel,) = chats
        assert isinstance(channel, WebhooksChannel) and channel.port
        url = f"http://127.0.0.1:{channel.port}"
        async with httpx.AsyncClient(base_url=url) as http:
            early = await http.post(
                "/hooks/issues", content=event, headers=_signed(KEY, event, "msg_early")
            )
            assert early.status_code == 503 and early.headers["retry-after"] == "5"
            await kernel.start()
            task = channels_run.start(Operator(kernel), config, chats)
            try:
                for _ in range(500):
                    if kernel.channel_states["webhooks"].state == "connected":
                        break
                    await asyncio.sleep(0.02)
                retried = await http.post(
                    "/hooks/issues", content=event, headers=_signed(KEY, event, "msg_early")
                )
                assert retried.status_code == 200, retried.text
                assert (await kernel.journal.adapters.get("webhooks") or {}).get("port") == (
                    channel.port
                )  # the same listener, not a second one
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await kernel.shutdown()
        assert channel.port is None  # closed with the channel

    asyncio.run(scene())


def test_while_pfar_takes_no_work_the_answer_is_503_with_retry_after(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    home = _home(tmp_path)
    config = Config.load(home.config)
    assert config.channels.webhooks is not None

    async def stopped() -> Operator:
        kernel = Kernel(home, config)
        await kernel.start()
        operator = Operator(kernel)
        await kernel.shutdown()  # a kernel shutting down takes no new work
        return operator

    async def nothing(*args: Any) -> Any:
        return None

    link = Link(
        "webhooks",
        asyncio.run(stopped()),
        lambda: None,
        nothing,
        nothing,
        nothing,
        lambda name: KEY,
        nothing,
        nothing,
    )
    channel = WebhooksChannel(config.channels.webhooks, lambda name: KEY, str(tmp_path))
    event = json.dumps({"issue": {"title": "x"}})
    with TestClient(channel.app(link)) as client:
        answer = client.post("/hooks/issues", content=event, headers=_signed(KEY, event, "m"))
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"


# -- signatures: the published example, and an independent HMAC both ways -------------


def _hmac_signature(key: str, msg_id: str, timestamp: int, body: str) -> str:
    secret = base64.b64decode(key.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.{body}".encode()
    digest = hmac.new(secret, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def test_signatures_match_the_published_example_and_an_independent_hmac() -> None:
    # Standard Webhooks' example (its specification and reference libraries' tests)
    key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    msg_id, timestamp, body = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    at = datetime.fromtimestamp(timestamp, UTC)
    assert Webhook(key).sign(msg_id, at, body) == expected
    assert _hmac_signature(key, msg_id, timestamp, body) == expected
    # both ways, now: ours verifies an independent signature, and the reverse
    now = int(time.time())
    mine = _hmac_signature(KEY, "m", now, "hello")
    headers = {"webhook-id": "m", "webhook-timestamp": str(now), "webhook-signature": mine}
    assert _verified(Webhook(KEY), b"hello", headers)
    theirs = Webhook(KEY).sign("m", datetime.fromtimestamp(now, UTC), "hello")
    assert theirs == mine
    # several signatures in one header (a sender mid-rotation): one that fits is enough
    headers["webhook-signature"] = f"v1,AAAA {mine}"
    assert _verified(Webhook(KEY), b"hello", headers)


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=300),
    headers=st.dictionaries(
        st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature", "x"]),
        st.text(max_size=80),
    ),
)
def test_any_request_is_verified_or_refused_never_crashes(
    body: bytes, headers: dict[str, str]
) -> None:
    assert _verified(Webhook(KEY), body, headers) in (True, False)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=300), pointer=st.sampled_from(["body", "/a", "/a/0", "/x~1y"]))
def test_any_body_gives_text_or_a_clear_refusal(body: bytes, pointer: str) -> None:
    route = WebhookRoute(path="/p", template="t", secrets=["k"], text=pointer)
    try:
        text = _text(route, body)
    except ValueError as exc:
        assert str(exc)
    else:
        assert isinstance(text, str) and text.strip()
