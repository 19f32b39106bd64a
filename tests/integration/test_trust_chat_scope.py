"""The owner is obeyed only in the owner's private chat (issue #22): a command the owner
sends in a Telegram group, where others read the answer, is ignored (the owner is told
why, in private), and a button of pfar's pressed anywhere but pfar's chat answers
nothing; on Slack, a button pressed outside the owner's DM answers nothing either.
Through a kernel with the real python-telegram-bot and Slack clients against loopback
servers."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.vault.home import Home

from .channel_support import kernel_with_channels, until
from .slack_server import Posted, SlackApi
from .telegram_server import OWNER, BotApi, Sent, unescape
from .test_slack import slack_home
from .test_telegram import telegram_home

GROUP = {"id": -100555, "type": "supergroup", "title": "team"}


def _texts(api: BotApi) -> list[tuple[int, str]]:
    return [(s.chat_id, unescape(s.text)) for s in api.sent]


def test_a_telegram_command_in_a_group_is_ignored_and_the_owner_told_in_private(
    tmp_path: Path,
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.sent, "the start report")  # what came before it is skipped
        api.say("start something in the group", chat=GROUP)
        api.say("/tasks", chat=GROUP)
        await until(  # one for each
            lambda: len([t for c, t in _texts(api) if c == OWNER and "only here" in t]) == 2,
            "the private notices",
        )
        # a group's own id can also be the owner's only if Telegram lies: the type counts
        api.say("start something else", chat={"id": OWNER, "type": "group", "title": "x"})
        await until(lambda: len([t for c, t in _texts(api) if "only here" in t]) == 3, "the notice")
        assert await op.tasks() == []
        assert not [s for s in api.sent if s.chat_id == GROUP["id"]]  # the group heard nothing
        # in private, the same owner is obeyed
        api.say("hello in private")
        await until(lambda: any("You said: hello in private" in t for _, t in _texts(api)), "it")
        assert len(await op.tasks()) == 1

    asyncio.run(_with(home, body))
    audit = home.audit_log.read_text()
    assert "not the private chat" in audit


def test_a_telegram_button_pressed_in_another_chat_answers_nothing(tmp_path: Path) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.sent, "the start report")
        api.say("write the file")
        question: Sent = await until(
            lambda: next((s for s in api.sent if s.reply_markup), None), "the permission prompt"
        )
        assert question.reply_markup is not None
        yes = question.reply_markup["inline_keyboard"][0][0]["callback_data"]
        api.press(question, yes, chat=GROUP)  # the owner, but the message shown elsewhere
        await until(lambda: api.answered, "the refusal")
        assert "only in its chat" in api.answered[0]["text"]
        assert (await op.questions()).approvals  # still asked
        api.press(question, yes)
        await until((tmp_path / "x.txt").exists, "the write")

    asyncio.run(_with(home, body))


def test_a_slack_button_pressed_outside_the_dm_answers_nothing(tmp_path: Path) -> None:
    api = SlackApi()
    home = slack_home(tmp_path, api)

    async def body(kernel: Kernel, op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.say("write the file")
        question: Posted = await until(
            lambda: next((p for p in api.posted if p.buttons()), None), "the permission prompt"
        )
        yes = question.buttons()[0]["value"]
        elsewhere = dataclasses.replace(question, channel="C0GENERAL")
        api.press(elsewhere, yes)
        await until(lambda: "outside the owner" in home.audit_log.read_text(), "the refusal")
        assert (await op.questions()).approvals  # still asked
        api.press(question, yes)
        await until((tmp_path / "x.txt").exists, "the write")

    try:
        asyncio.run(_with(home, body))
    finally:
        api.close()


async def _with(home: Home, body: Any) -> None:
    async with kernel_with_channels(home) as (kernel, _):
        await body(kernel, Operator(kernel))
