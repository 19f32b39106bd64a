"""The Telegram channel through a real kernel and the real python-telegram-bot client,
against a loopback Bot API server: the owner's messages become tasks and replies,
buttons answer questions once, a credential reply is stored and deleted from the chat,
a 429 is waited out, other users are ignored, text is escaped for MarkdownV2. The
offset across a SIGKILL (R6) is in tests/crash/test_telegram_crash.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home
from .channel_support import kernel_with_channels, known, until
from .telegram_server import OWNER, TOKEN, BotApi, Sent, unescape


def telegram_home(tmp_path: Path, api: BotApi, extra: str = "") -> Home:
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.05
adapter_retry_backoff_max_seconds = 0.2
[channels]
directory = "{tmp_path}"
[channels.telegram]
owner_user_id = {OWNER}
api_url = "{api.url}"
poll_timeout_seconds = 1
[loop]
{extra or 'tools = ["Write"]'}
"""
    home = make_home(tmp_path / "home", config=config)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("telegram_bot_token", TOKEN)
    store.close()
    return home


async def _with(home: Home, body: Callable[[Kernel, Operator], Awaitable[Any]]) -> Any:
    # a new bot skips what waited before it was connected: the owner writes after
    async with kernel_with_channels(home) as (kernel, _):
        return await body(kernel, Operator(kernel))


def _texts(api: BotApi) -> list[str]:
    return [unescape(s.text) for s in api.sent]


def test_a_message_starts_a_task_and_a_reply_to_its_answer_continues_it(
    tmp_path: Path,
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(
            lambda: any("Recovery report" in t or "System restarted" in t for t in _texts(api)),
            "the start report",
        )
        asked = api.say("hello there")
        said = await until(
            lambda: [s for s in api.sent if s.reply_to is not None], "the reply to the owner"
        )
        assert unescape(said[0].text).startswith("task ") and "started" in unescape(said[0].text)
        answer: Sent = await until(
            lambda: next(
                (s for s in api.sent if "You said: hello there" in unescape(s.text)), None
            ),
            "the task's answer",
        )
        assert answer.parse_mode == "MarkdownV2"
        await known(kernel, "telegram", answer.message_id)
        api.say("and more", reply_to=answer.message_id)
        await until(lambda: any("You said: and more" in t for t in _texts(api)), "the next")
        (task,) = await op.tasks()
        assert task.state is TaskState.WaitingForUser
        assert asked > 0
        (view,) = await op.channels()
        assert view.state == "connected" and view.position is not None
        assert view.position["last_offset"] >= asked

    asyncio.run(_with(home, body))


def test_buttons_answer_once_and_another_users_press_is_ignored(tmp_path: Path) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        api.say("write the file")
        question: Sent = await until(
            lambda: next((s for s in api.sent if s.reply_markup), None), "the permission prompt"
        )
        keyboard = question.reply_markup
        assert keyboard is not None
        buttons = keyboard["inline_keyboard"][0]
        assert [b["text"] for b in buttons] == ["Yes", "No", "Always allow", "Never allow"]
        yes = buttons[0]["callback_data"]
        assert len(yes.encode()) <= 64
        api.press(question, yes, user=999)  # not the owner
        await until(lambda: api.answered, "the refusal")
        assert "Only pfar's owner" in api.answered[0]["text"]
        assert (await op.questions()).approvals  # still asked
        api.press(question, yes)
        await until(lambda: len(api.answered) == 2, "the answer")
        assert api.answered[1]["text"] == "approve: done"
        await until((tmp_path / "x.txt").exists, "the write")
        api.press(question, yes)  # pressed again
        await until(lambda: len(api.answered) == 3, "the second answer")
        assert api.answered[2]["text"].startswith("already answered")
        assert any(str(e.get("message_id")) == str(question.message_id) for e in api.edited)

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()  # flushed at shutdown
    assert "telegram_ignored" in audit and "999" in audit


def test_messages_from_others_are_ignored_and_create_nothing(tmp_path: Path) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        api.say("start something", user=31337)
        last = api.say("/tasks")
        await until(lambda: any(s.reply_to for s in api.sent), "the owner's reply")
        assert await op.tasks() == []
        assert all(s.reply_to != last - 1 for s in api.sent)

    asyncio.run(_with(home, body))


def test_a_credential_reply_is_stored_and_deleted_from_the_chat(tmp_path: Path) -> None:
    api = BotApi()
    home = telegram_home(
        tmp_path,
        api,
        'tools = ["admin.prompt_credential"]\nalways_allow = ["admin.prompt_credential"]\n',
    )
    secret = "s3cr3t-value-which-must-never-show"

    async def body(kernel: Kernel, op: Operator) -> None:
        api.say("key please")
        sent: Sent = await until(
            lambda: next((s for s in api.sent if "credential" in unescape(s.text).lower()), None),
            "the credential prompt",
        )
        (prompt,) = (await op.questions()).credentials
        await known(kernel, "telegram", sent.message_id)
        api.say(secret, reply_to=sent.message_id)
        await until(lambda: api.deleted, "the deletion of the owner's message")
        assert api.deleted[0][0] == 4242
        name = prompt.vault_ref.removeprefix("vault:")
        await until(lambda: kernel.secrets.get(name) == secret, "the secret in the vault")
        await until(lambda: any("credential stored" in t for t in _texts(api)), "the reply")
        assert all(secret not in s.text for s in api.sent)

    asyncio.run(_with(home, body))
    assert secret.encode() not in home.sessions_db.read_bytes()
    assert secret not in home.audit_log.read_text()


def test_a_429_is_waited_out_and_the_message_sent_once(tmp_path: Path) -> None:
    api = BotApi()
    api.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.sent, "the report after the 429")
        await asyncio.sleep(0.5)
        reports = [t for t in _texts(api) if t.startswith("System restarted")]
        assert len(reports) == 1
        sends = [c for c, _ in api.calls if c == "sendMessage"]
        assert len(sends) == 2  # the refused one, then the one that went out

    asyncio.run(_with(home, body))


def test_text_is_escaped_for_markdown_v2_and_long_text_split(tmp_path: Path) -> None:
    from pfar.adapters.telegram import chunks

    api = BotApi()
    home = telegram_home(tmp_path, api)
    tricky = "a_b*c[d](e)~f>g#h+i-j=k|l{m}n.o!p\\q"

    async def body(kernel: Kernel, op: Operator) -> None:
        api.say(f"echo {tricky}")
        found: Sent = await until(
            lambda: next((s for s in api.sent if "You said" in unescape(s.text)), None), "it"
        )
        assert tricky in unescape(found.text)
        assert "\\_" in found.text and "\\*" in found.text and "\\\\" in found.text

    asyncio.run(_with(home, body))
    long = "\n".join(f"line {i} " + "x" * 90 for i in range(200))
    pieces = chunks(long)
    assert len(pieces) > 1 and all(len(p) <= 3500 for p in pieces)
    assert "\n".join(pieces) == long


def test_a_refused_token_degrades_the_channel_and_says_how_to_renew(tmp_path: Path) -> None:
    api = BotApi(token="999:another-token")
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(
            lambda: kernel.channel_states["telegram"].state == "degraded", "the degraded state"
        )
        (view,) = await op.channels()
        assert "refused the bot token" in (view.last_error or "")
        log = (home.root / "owner.log").read_text()
        assert "Channel telegram is degraded" in log and "@BotFather" in log
        assert TOKEN not in log

    asyncio.run(_with(home, body))


def test_the_server_going_away_degrades_the_channel_and_its_return_reconnects_it(
    tmp_path: Path,
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)
    home.config.write_text(
        home.config.read_text().replace("[recovery]\n", "[recovery]\nadapter_max_retries = 2\n")
    )

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.sent, "the start report")
        await until(lambda: kernel.channel_states["telegram"].state == "connected", "connected")
        api.go_away()
        seen = set()

        def degraded() -> bool:
            seen.add(kernel.channel_states["telegram"].state)
            return kernel.channel_states["telegram"].state == "degraded"

        await until(degraded, "the degraded state", 30)
        assert "retrying" in seen  # retried on its backoff first
        (view,) = await op.channels()
        error = view.last_error or ""
        assert view.failures > 2, view
        assert "cannot be reached" in error or "getUpdates failed" in error, view
        sent_before = len(api.sent)
        api.come_back()
        await until(
            lambda: kernel.channel_states["telegram"].state == "connected", "reconnected", 30
        )
        # the owner hears of the outage on the channel, once it works again
        await until(
            lambda: any("Channel telegram is degraded" in t for t in _texts(api)[sent_before:]),
            "the degraded notice",
        )
        api.say("/tasks")
        await until(lambda: any(s.reply_to for s in api.sent), "a reply after the return")
        (view,) = await op.channels()
        assert view.state == "connected" and view.failures == 0

    asyncio.run(_with(home, body))


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    presses=st.lists(
        st.text(max_size=80) | st.binary(max_size=64).map(repr), min_size=5, max_size=5
    ),
    strangers=st.lists(st.text(min_size=1, max_size=300), min_size=3, max_size=3),
)
def test_any_button_data_or_strangers_words_create_nothing_and_never_end_the_channel(
    tmp_path_factory: pytest.TempPathFactory, presses: list[str], strangers: list[str]
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path_factory.mktemp("telegram"), api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.sent, "the start report")
        for data in presses:
            api.press(api.sent[0], data)
        for text in strangers:
            api.say(text, user=31337)
        api.say("/tasks")
        await until(lambda: any(s.reply_to for s in api.sent), "the owner's reply")
        await until(lambda: len(api.answered) == len(presses), "every press answered")
        assert await op.tasks() == []
        assert kernel.channel_states["telegram"].failures == 0

    try:
        asyncio.run(_with(home, body))
    finally:
        api.close()


def test_a_new_bot_skips_what_waited_before_it_and_takes_everything_after(
    tmp_path: Path,
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)
    api.say("written before pfar knew the bot")
    api.say("this one too")

    async def body(kernel: Kernel, op: Operator) -> None:
        api.say("first after the start")
        api.say("second after the start")
        await until(lambda: len([s for s in api.sent if s.reply_to]) == 2, "both replies")
        prompts = []
        for t in await op.tasks():
            row = await kernel.journal.tasks.get(t.task_id)
            assert row.trigger_event is not None
            prompts.append(row.trigger_event["text"])
        assert sorted(prompts) == ["first after the start", "second after the start"]

    asyncio.run(_with(home, body))
    (skipped,) = [
        json.loads(line)
        for line in home.audit_log.read_text().splitlines()
        if "telegram_offset_missing" in line
    ]
    assert skipped["skipped"] == 1  # the latest of the two; `-1` confirmed the one before
