"""The WhatsApp channel through a real kernel, against a loopback Graph API and Meta's
signed webhooks: the owner's messages become tasks and replies, a notification
delivered again makes no second effect, the subscription handshake, forged, missing,
oversized and malformed requests refused, strangers ignored, answers as buttons or a
list answered once, a credential reply stored and never shown, a 429 waited out, an
expired token degrading the channel."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pfar.adapters.channel import Press
from pfar.adapters.whatsapp import WhatsAppChannel, signature
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home
from .channel_support import kernel_with_channels, known, until
from .whatsapp_server import (
    APP_SECRET,
    OWNER,
    PHONE_ID,
    TOKEN,
    VERIFY_TOKEN,
    GraphApi,
    Meta,
    Sent,
)


@pytest.fixture
def api() -> Iterator[GraphApi]:
    server = GraphApi()
    try:
        yield server
    finally:
        server.close()


def whatsapp_home(tmp_path: Path, api: GraphApi, extra: str = "") -> Home:
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.05
adapter_retry_backoff_max_seconds = 0.2
[channels]
directory = "{tmp_path}"
ready_timeout_seconds = 5
[channels.whatsapp]
owner_number = "{OWNER}"
phone_number_id = "{PHONE_ID}"
api_url = "{api.url}"
port = 0
max_body_bytes = 4096
[loop]
{extra or 'tools = ["Write"]'}
"""
    home = make_home(tmp_path / "home", config=config)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("whatsapp_token", TOKEN)
    store.set("whatsapp_app_secret", APP_SECRET)
    store.set("whatsapp_verify_token", VERIFY_TOKEN)
    store.close()
    return home


async def _with(home: Home, body: Callable[[Kernel, Operator, Meta], Awaitable[Any]]) -> Any:
    ports: list[int] = []

    def listening(chats: list[Any]) -> None:
        (channel,) = chats
        assert isinstance(channel, WhatsAppChannel) and channel.port
        ports.append(channel.port)

    async with kernel_with_channels(home, early=listening) as (kernel, _):
        meta = Meta(f"http://127.0.0.1:{ports[0]}/whatsapp")
        return await body(kernel, Operator(kernel), meta)


def _find(api: GraphApi, needle: str) -> Callable[[], Sent | None]:
    return lambda: next((s for s in list(api.sent) if needle in s.text), None)


def _replies_to(api: GraphApi, wamid: str) -> list[Sent]:
    return [
        s for s in list(api.sent) if (s.payload.get("context") or {}).get("message_id") == wamid
    ]


def test_a_message_starts_a_task_and_a_reply_to_its_answer_continues_it(
    tmp_path: Path, api: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(lambda: api.sent, "the start report")
        hello = meta.message("hello there")
        answer = await meta.deliver(hello)
        assert answer.status_code == 200, answer.text
        said = await until(lambda: _replies_to(api, hello["id"]), "the reply")
        assert said[0].text.startswith("task ") and "started" in said[0].text
        assert said[0].payload["to"] == OWNER
        result = await until(_find(api, "You said: hello there"), "the task's answer")
        await known(kernel, "whatsapp", result.id)
        more = meta.message("and more", context=result.id)
        await meta.deliver(more)
        await until(_find(api, "You said: and more"), "the next answer")
        (task,) = await op.tasks()
        assert task.state is TaskState.WaitingForUser
        (view,) = await op.channels()
        assert view.state == "connected"
        assert view.position is not None and view.position["last_message_id"] == more["id"]

    asyncio.run(_with(home, body))


def test_a_notification_delivered_again_makes_no_second_task(tmp_path: Path, api: GraphApi) -> None:
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(lambda: api.sent, "the start report")
        message = meta.message("only once")
        assert (await meta.deliver(message)).status_code == 200
        assert (await meta.deliver(message)).status_code == 200  # Meta's retry
        await until(_find(api, "You said: only once"), "the answer")
        assert len(await op.tasks()) == 1
        assert len(_replies_to(api, message["id"])) == 1

    asyncio.run(_with(home, body))


def test_the_subscription_handshake_answers_only_the_verify_token(
    tmp_path: Path, api: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        async with httpx.AsyncClient() as http:
            params = {"hub.mode": "subscribe", "hub.challenge": "1158201444"}
            right = await http.get(meta.url, params={**params, "hub.verify_token": VERIFY_TOKEN})
            assert right.status_code == 200 and right.text == "1158201444"
            wrong = await http.get(meta.url, params={**params, "hub.verify_token": "guess"})
            assert wrong.status_code == 403 and "1158201444" not in wrong.text
            bare = await http.get(meta.url)
            assert bare.status_code == 403

    asyncio.run(_with(home, body))


def test_forged_oversized_and_malformed_notifications_are_refused(
    tmp_path: Path, api: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, api)
    marker = "forged-body-marker"

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        good = json.dumps(meta.notification(meta.message(marker))).encode()
        forged = await meta.post(good, signature=signature("another secret", good))
        assert forged.status_code == 401
        unsigned = await meta.post(good, signature=None)
        assert unsigned.status_code == 401
        tampered = await meta.post(
            good.replace(marker.encode(), b"tampered"), signature=signature(APP_SECRET, good)
        )
        assert tampered.status_code == 401
        huge = json.dumps(meta.notification(meta.message("x" * 5000))).encode()
        assert (await meta.post(huge)).status_code == 413
        assert (await meta.post(b"{not json")).status_code == 400
        odd = await meta.post(json.dumps({"entry": [{"changes": "no"}]}).encode())
        assert odd.status_code == 200  # Meta's, and nothing in it: taken, nothing done
        assert await op.tasks() == []

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert audit.count("whatsapp_refused") == 5
    assert marker not in audit


def test_messages_from_other_numbers_are_ignored_and_create_nothing(
    tmp_path: Path, api: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        stranger = meta.message("start something", sender="15550199999")
        await meta.deliver(stranger)
        tasks_asked = meta.message("tasks")
        await meta.deliver(tasks_asked)
        await until(lambda: _replies_to(api, tasks_asked["id"]), "the owner's reply")
        assert await op.tasks() == []
        assert not _replies_to(api, stranger["id"])

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert "whatsapp_ignored" in audit and "15550199999" in audit


def test_a_permission_prompt_is_a_list_answered_once(tmp_path: Path, api: GraphApi) -> None:
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await meta.deliver(meta.message("write the file"))
        prompt: Sent = await until(
            lambda: next((s for s in api.sent if s.answers()), None), "the permission prompt"
        )
        assert prompt.payload["interactive"]["type"] == "list"
        answers = prompt.answers()
        assert [t for _, t in answers] == ["Yes", "No", "Always allow", "Never allow"]
        yes = answers[0][0]
        stranger = meta.message(sender="15550199999", reply_id=yes, list_reply=True)
        await meta.deliver(stranger)
        assert (await op.questions()).approvals  # still asked
        first = meta.message(reply_id=yes, list_reply=True)
        await meta.deliver(first)
        await until((tmp_path / "x.txt").exists, "the write")
        # the reply is posted apart from the task it let go on: either may come first
        replied = await until(lambda: _replies_to(api, first["id"]), "the answer's reply")
        assert replied[0].text == "approve: done"
        again = meta.message(reply_id=yes, list_reply=True)
        await meta.deliver(again)
        said = await until(lambda: _replies_to(api, again["id"]), "the second answer")
        assert said[0].text.startswith("already answered")

    asyncio.run(_with(home, body))


def test_a_credential_reply_is_stored_and_never_shown(tmp_path: Path, api: GraphApi) -> None:
    home = whatsapp_home(
        tmp_path,
        api,
        'tools = ["admin.prompt_credential"]\nalways_allow = ["admin.prompt_credential"]\n',
    )
    secret = "s3cr3t-value-which-must-never-show"

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await meta.deliver(meta.message("key please"))
        prompt: Sent = await until(_find(api, "redential"), "the credential prompt")
        (question,) = (await op.questions()).credentials
        await known(kernel, "whatsapp", prompt.id)
        answer = meta.message(secret, context=prompt.id)
        await meta.deliver(answer)
        name = question.vault_ref.removeprefix("vault:")
        await until(lambda: kernel.secrets.get(name) == secret, "the secret in the vault")
        said = await until(lambda: _replies_to(api, answer["id"]), "the reply")
        assert "credential stored" in said[0].text and "delete it" in said[0].text
        assert all(secret not in json.dumps(s.payload) for s in api.sent)

    asyncio.run(_with(home, body))
    assert secret.encode() not in home.sessions_db.read_bytes()
    assert secret not in home.audit_log.read_text()


def test_a_429_is_waited_out_and_the_message_sent_once(tmp_path: Path, api: GraphApi) -> None:
    home = whatsapp_home(tmp_path, api)
    api.fail_next(
        f"{PHONE_ID}/messages",
        429,
        {"message": "Rate limit hit", "code": 130429},
        {"Retry-After": "1"},
    )

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(lambda: api.sent, "the start report after the 429")
        await asyncio.sleep(0.3)
        posts = [c for c in api.calls if c == ("POST", f"{PHONE_ID}/messages")]
        assert len(posts) == 2 and len(api.sent) == 1

    asyncio.run(_with(home, body))


def test_an_expired_token_degrades_the_channel_and_names_no_token(
    tmp_path: Path, api: GraphApi
) -> None:
    api.token = "another-token"  # the vault's token is no longer valid
    home = whatsapp_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(
            lambda: kernel.channel_states["whatsapp"].state == "degraded", "the degraded state"
        )
        (view,) = await op.channels()
        assert "code 190" in (view.last_error or "")
        # what Meta sends meanwhile is not taken: its retries bring it later
        with contextlib.suppress(httpx.TransportError):
            answer = await meta.deliver(meta.message("hello"))
            assert answer.status_code == 503
        assert await op.tasks() == []

    asyncio.run(_with(home, body))
    log = home.owner_log.read_text()
    assert "Channel whatsapp is degraded" in log and "pfar secret set whatsapp_token" in log
    assert TOKEN not in log


def test_signature_known_answer_and_press_ids() -> None:
    # Meta's scheme, HMAC-SHA256 of the raw body in hex, against a value computed
    # apart from Python (`openssl dgst -sha256 -hmac s3cret` of the same bytes)
    body, secret = b'{"a":1}', "s3cret"
    known = "sha256=5910e62016ef5034272c926c27071992a465c2335cecf41851bda071577f4f6d"
    assert signature(secret, body) == known
    assert (
        signature(secret, body) == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    )
    assert Press.parse(Press("abc", "approve").data()) == Press("abc", "approve")
    assert Press.parse("q:a:b:c") == Press("a", "b:c")  # an option may hold a colon
    for bad in (None, "", "q::x", "x:a:b", 3):
        assert Press.parse(bad) is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_message = st.fixed_dictionaries(
    {"id": _json | st.text(max_size=30), "type": st.sampled_from(["text", "interactive", "x"])},
    optional={
        "from": st.sampled_from(["15550199999", None, 1]) | st.text(max_size=5),
        "text": _json,
        "interactive": _json,
        "context": _json,
    },
)
_notification = st.one_of(
    _json,
    st.builds(lambda ms: Meta.notification(*ms), st.lists(_message, min_size=1, max_size=4)),
)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    bodies=st.lists(
        _notification.map(lambda n: json.dumps(n).encode()) | st.binary(), min_size=8, max_size=8
    )
)
def test_any_signed_body_creates_nothing_and_never_ends_the_listener(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes]
) -> None:
    api = GraphApi()
    home = whatsapp_home(tmp_path_factory.mktemp("whatsapp"), api)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        for raw in bodies:
            answer = await meta.post(raw)
            assert answer.status_code in (200, 400, 413), answer.text
        asked = meta.message("tasks")
        await meta.deliver(asked)
        await until(lambda: _replies_to(api, asked["id"]), "the owner's reply")
        assert await op.tasks() == []
        assert kernel.channel_states["whatsapp"].failures == 0

    try:
        asyncio.run(_with(home, body))
    finally:
        api.close()
