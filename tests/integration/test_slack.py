"""The Slack channel through a real kernel and the real slack_sdk clients (Web API and
Socket Mode), against a loopback Slack: the owner's DM messages become tasks and
replies, envelopes are acknowledged after their effect and a redelivered one makes no
second effect, buttons answer once, other users and teams are ignored, a credential
reply is stored and never shown, a 429 is waited out, a dropped connection is
reconnected and what was missed is caught up from the DM's history."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pfar.adapters.channel import Press
from pfar.adapters.slack import chunks, escape
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home
from .channel_support import kernel_with_channels, known, until
from .slack_server import APP_TOKEN, BOT_TOKEN, DM, OWNER, TEAM, Posted, SlackApi


@pytest.fixture
def api() -> Iterator[SlackApi]:
    server = SlackApi()
    try:
        yield server
    finally:
        server.close()


def slack_home(tmp_path: Path, api: SlackApi, extra: str = "", *, tokens: bool = True) -> Home:
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.05
adapter_retry_backoff_max_seconds = 0.2
adapter_max_retries = 2
[channels]
directory = "{tmp_path}"
ready_timeout_seconds = 5
[channels.slack]
owner_user_id = "{OWNER}"
owner_team_id = "{TEAM}"
api_url = "{api.url}"
ping_interval_seconds = 0.2
catch_up_after_seconds = 0.5
[loop]
{extra or 'tools = ["Write"]'}
"""
    home = make_home(tmp_path / "home", config=config)
    if tokens:
        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("slack_bot_token", BOT_TOKEN)
        store.set("slack_app_token", APP_TOKEN)
        store.close()
    return home


async def _with(home: Home, body: Callable[[Kernel, Operator], Awaitable[Any]]) -> Any:
    async with kernel_with_channels(home) as (kernel, _):
        return await body(kernel, Operator(kernel))


def _posted(api: SlackApi, needle: str) -> Callable[[], Posted | None]:
    return lambda: next((p for p in list(api.posted) if needle in p.text), None)


async def _connected(op: Operator) -> None:
    async def state() -> str:
        return (await op.channels())[0].state

    for _ in range(500):
        if await state() == "connected":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the channel is {await state()}")


def test_a_dm_starts_a_task_and_a_thread_reply_continues_it(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        said = api.say("hello there")
        started = await until(
            lambda: next((p for p in api.posted if p.thread_ts == said), None), "the reply"
        )
        assert started.text.startswith("task ") and "started" in started.text
        answer = await until(_posted(api, "You said: hello there"), "the task's answer")
        assert answer.channel == DM
        await known(kernel, "slack", answer.ts)
        api.say("and more", thread=answer.ts)
        await until(_posted(api, "You said: and more"), "the next answer")
        (task,) = await op.tasks()
        assert task.state is TaskState.WaitingForUser
        # every envelope acknowledged, none left for Slack to retry
        await until(lambda: not api.unacked and len(api.acked) == 2, "the acks")
        (view,) = await op.channels()
        assert view.state == "connected" and view.position is not None
        assert view.position["last_ts"] == api.history[-2]["ts"] or view.position["last_ts"]

    asyncio.run(_with(home, body))


def test_a_redelivered_envelope_makes_no_second_task(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        said = api.say("only once")
        await until(lambda: api.acked, "the ack")
        envelope = api.acked[0]
        # Slack's retry of the same envelope (as if the ack had been lost)
        api._push(
            {
                "type": "events_api",
                "envelope_id": envelope + "-retry",
                "retry_attempt": 1,
                "retry_reason": "timeout",
                "payload": {
                    "type": "event_callback",
                    "team_id": TEAM,
                    "event": {
                        "type": "message",
                        "channel": DM,
                        "user": OWNER,
                        "text": "only once",
                        "ts": said,
                    },
                },
            }
        )
        await until(lambda: len(api.acked) == 2, "the retry's ack")
        await until(_posted(api, "You said: only once"), "the answer")
        assert len(await op.tasks()) == 1
        assert len([p for p in api.posted if p.thread_ts == said]) == 1

    asyncio.run(_with(home, body))


def test_buttons_answer_once_and_another_users_press_is_ignored(
    tmp_path: Path, api: SlackApi
) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.say("write the file")
        question: Posted = await until(
            lambda: next((p for p in api.posted if p.buttons()), None), "the permission prompt"
        )
        buttons = question.buttons()
        assert [b["text"]["text"] for b in buttons] == ["Yes", "No", "Always allow", "Never allow"]
        yes = buttons[0]["value"]
        api.press(question, yes, user="U0STRANGER")
        await until(lambda: api.ephemeral, "the refusal")
        assert "Only pfar's owner" in api.ephemeral[0]["text"]
        api.press(question, yes, user=OWNER, team="T0OTHERTEAM")  # the owner's id, elsewhere
        await until(lambda: len(api.ephemeral) == 2, "the second refusal")
        assert (await op.questions()).approvals  # still asked
        api.press(question, yes)
        await until((tmp_path / "x.txt").exists, "the write")
        update = await until(
            lambda: next((u for u in api.updated if u["ts"] == question.ts), None),
            "the answered prompt",
        )
        assert all(b["type"] != "actions" for b in update["blocks"])
        assert "approve: done" in str(update["blocks"])
        api.press(question, yes)  # pressed again
        await until(_posted(api, "already answered"), "the second answer")

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert "slack_ignored" in audit and "U0STRANGER" in audit and "T0OTHERTEAM" in audit


def test_messages_from_others_and_elsewhere_create_nothing(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.say("start something", user="U0STRANGER")
        api.say("start something", team="T0OTHERTEAM")
        api.say("start something", channel="C0PUBLIC")
        last = api.say("tasks")
        await until(
            lambda: next((p for p in api.posted if p.thread_ts == last), None), "the owner's reply"
        )
        assert await op.tasks() == []
        assert [p.thread_ts for p in api.posted if p.thread_ts] == [last]
        await until(lambda: len(api.acked) == 4, "every envelope acknowledged")

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert audit.count("slack_ignored") == 3


def test_a_credential_reply_is_stored_and_never_shown(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(
        tmp_path,
        api,
        'tools = ["admin.prompt_credential"]\nalways_allow = ["admin.prompt_credential"]\n',
    )
    secret = "s3cr3t-value-which-must-never-show"

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.say("key please")
        prompt_message: Posted = await until(_posted(api, "credential"), "the credential prompt")
        (prompt,) = (await op.questions()).credentials
        await known(kernel, "slack", prompt_message.ts)
        said = api.say(secret, thread=prompt_message.ts)
        await until(lambda: api.deleted, "the deletion of the owner's message")
        assert api.deleted[0]["ts"] == said
        name = prompt.vault_ref.removeprefix("vault:")
        await until(lambda: kernel.secrets.get(name) == secret, "the secret in the vault")
        await until(_posted(api, "credential stored"), "the reply")
        assert all(secret not in p.text and secret not in str(p.blocks) for p in api.posted)

    asyncio.run(_with(home, body))
    assert secret.encode() not in home.sessions_db.read_bytes()
    assert secret not in home.audit_log.read_text()


def test_a_429_is_waited_out_and_the_message_posted_once(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)
    api.fail_next(
        "chat.postMessage", 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
    )

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report after the 429")
        await asyncio.sleep(0.3)
        posts = [c for c in api.calls if c[0] == "chat.postMessage"]
        assert len(posts) == 2  # the refused one, then the one that went through
        assert len(api.posted) == 1

    asyncio.run(_with(home, body))


def test_a_dropped_connection_is_reconnected_and_missed_messages_caught_up(
    tmp_path: Path, api: SlackApi
) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        await _connected(op)
        api.say("before")
        await until(_posted(api, "You said: before"), "the first answer")
        # a disconnect frame: the client opens a new connection at once
        api.disconnect_frame()
        await until(lambda: api.hellos >= 2, "the reconnection after a disconnect frame")
        # a network failure longer than catch_up_after_seconds, during which the owner
        # writes and Slack gives up on delivering it
        api.refuse_sockets = True
        api.drop()
        await asyncio.sleep(1.5)
        missed = api.say("while you were away", deliver=False)
        api.refuse_sockets = False
        await until(_posted(api, "You said: while you were away"), "the caught-up message", 30)
        reply_to_missed = next(p for p in api.posted if p.thread_ts == missed)
        assert "caught up" in reply_to_missed.text
        assert any(c[0] == "conversations.history" for c in api.calls)
        assert len(await op.tasks()) == 2

    asyncio.run(_with(home, body))


def test_a_refused_token_degrades_the_channel_and_names_no_token(
    tmp_path: Path, api: SlackApi
) -> None:
    home = slack_home(tmp_path, api)
    for _ in range(3):
        api.fail_next("auth.test", 200, {"ok": False, "error": "token_revoked"})

    async def body(kernel: Kernel, op: Operator) -> None:
        view = None
        for _ in range(500):
            (view,) = await op.channels()
            if view.state == "degraded":
                break
            await asyncio.sleep(0.02)
        assert view is not None and view.state == "degraded", view
        assert "token_revoked" in (view.last_error or "")
        assert BOT_TOKEN not in (view.last_error or "")
        # the token comes back: the channel reconnects on its own
        await _connected(op)

    asyncio.run(_with(home, body))
    assert BOT_TOKEN not in home.owner_log.read_text()


def test_missing_tokens_degrade_the_channel_with_how_to_set_them(
    tmp_path: Path, api: SlackApi
) -> None:
    home = slack_home(tmp_path, api, tokens=False)

    async def body(kernel: Kernel, op: Operator) -> None:
        for _ in range(500):
            (view,) = await op.channels()
            if view.state == "degraded":
                break
            await asyncio.sleep(0.02)
        assert view.state == "degraded" and "slack_bot_token" in (view.last_error or "")

    asyncio.run(_with(home, body))
    assert "pfar secret set slack_bot_token" in home.owner_log.read_text()


def test_text_helpers() -> None:
    assert escape("a <b> & c") == "a &lt;b&gt; &amp; c"
    assert Press.parse(Press("abc", "approve").data()) == Press("abc", "approve")
    for bad in (None, "", "q::x", "x:a:b", 3):
        assert Press.parse(bad) is None
    assert Press.parse("q:a:b:c") == Press("a", "b:c")  # an option may hold a colon
    long = "\n".join(f"line {n}" for n in range(2000))
    pieces = chunks(long)
    assert all(len(p) <= 3000 for p in pieces) and "\n".join(pieces) == long


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_field = st.sampled_from(["message", "app_mention", 3, None, ""]) | st.text(max_size=10)
_event = st.fixed_dictionaries(
    {"type": _field, "channel": st.sampled_from([DM, "C0X", None, 1]), "ts": _json, "text": _json},
    optional={"user": st.sampled_from([OWNER, "U0X", None]), "team": _json, "subtype": _json},
)
_payload = st.one_of(
    _json,
    st.fixed_dictionaries({"type": st.just("event_callback"), "event": _event | _json}),
    st.fixed_dictionaries(
        {"type": st.just("block_actions")},
        optional={
            "user": _json,
            "team": _json,
            "actions": _json,
            "channel": _json,
            "message": _json,
        },
    ),
)
_envelope = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["events_api", "interactive", "slash_commands", "x"]),
        "payload": _payload,
    }
)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(envelopes=st.lists(_envelope, min_size=10, max_size=10))
def test_malformed_envelopes_create_nothing_and_never_end_the_channel(
    tmp_path_factory: pytest.TempPathFactory, envelopes: list[dict[str, Any]]
) -> None:
    api = SlackApi()
    home = slack_home(tmp_path_factory.mktemp("slack"), api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        for n, envelope in enumerate(envelopes):
            api._push({**envelope, "envelope_id": f"junk-{n}"})
        last = api.say("tasks")
        await until(
            lambda: next((p for p in api.posted if p.thread_ts == last), None), "the owner's reply"
        )
        assert await op.tasks() == []
        (view,) = await op.channels()
        assert view.state == "connected" and view.failures == 0

    try:
        asyncio.run(_with(home, body))
    finally:
        api.close()


def test_a_rate_limited_answer_holds_back_no_acknowledgement(tmp_path: Path, api: SlackApi) -> None:
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.fail_next(
            "chat.postMessage", 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "3"}
        )
        first = api.say("tasks")
        second = api.say("tasks")
        await until(lambda: len(api.acked) == 2, "both envelopes acknowledged")
        # acknowledged while the answer to the first still waits out Slack's Retry-After
        assert not any(p.thread_ts == first for p in api.posted)
        await until(
            lambda: {p.thread_ts for p in api.posted} >= {first, second}, "both answers", 20
        )

    asyncio.run(_with(home, body))
