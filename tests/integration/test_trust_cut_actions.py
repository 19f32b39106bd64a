"""A cut approval on a chat: no Yes one tap away until the owner has seen the whole
action (`show ID` sends it, split to the channel's message limit), through a kernel
with the real Telegram and Slack clients against loopback servers (issue #22)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from pfar.adapters import run as channels_run
from pfar.adapters.channel import Press
from pfar.config import Config
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.vault.home import Home

from .channel_support import until
from .slack_server import Posted, SlackApi
from .telegram_server import BotApi, Sent, unescape
from .test_slack import slack_home
from .test_telegram import telegram_home

# longer than a chat shows (600 + 200 characters) and than one Telegram message
CONTENT = "BEGIN " + "".join(f"line {n:04d} of the file\n" for n in range(400)) + " END-MARK"


def long_write(request: ChatRequest) -> ChatResponse:
    if not any(m.role == "assistant" for m in request.messages):
        call = ToolCall("w", "Write", {"file_path": "x.txt", "content": CONTENT})
        return reply(request, "", [call])
    return reply(request, "written")


@contextlib.asynccontextmanager
async def _kernel(home: Home) -> AsyncIterator[Kernel]:
    config = Config.load(home.config)
    kernel = Kernel(home, config, model=ScriptedChatModel(long_write))
    chats = channels_run.build(config, lambda n: kernel.secrets.get(n), str(home.config))  # noqa: PLW0108
    await channels_run.listen_early(chats)
    await kernel.start()
    task = channels_run.start(Operator(kernel), config, chats)
    try:
        yield kernel
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kernel.shutdown()


def _run(home: Home, body: Callable[[Operator], Awaitable[None]]) -> None:
    async def go() -> None:
        async with _kernel(home) as kernel:
            await body(Operator(kernel))

    asyncio.run(go())


def _question_id(data: str) -> str:
    parsed = Press.parse(data)
    assert parsed is not None
    return parsed.question_id


def test_telegram_offers_no_yes_for_a_cut_action_until_it_was_shown_whole(
    tmp_path: Path,
) -> None:
    api = BotApi()
    home = telegram_home(tmp_path, api)
    written = tmp_path / "x.txt"

    def texts() -> list[str]:
        return [unescape(s.text) for s in api.sent]

    async def body(op: Operator) -> None:
        await until(lambda: api.sent, "the start report")
        api.say("write the long file")
        question: Sent = await until(
            lambda: next((s for s in api.sent if s.reply_markup), None), "the permission prompt"
        )
        assert question.reply_markup is not None
        buttons = question.reply_markup["inline_keyboard"][0]
        assert [b["text"] for b in buttons] == ["No", "Never allow"]  # no Yes, no Always
        qid = _question_id(buttons[0]["callback_data"])
        short = qid[:8]
        assert f"show {short}" in unescape(question.text)
        # a Yes button (an older message's, or forged) and the text command: refused
        api.press(question, Press(qid, "approve").data())
        await until(lambda: api.answered, "the refused press")
        assert api.answered[0]["text"].startswith("not taken")
        api.say(f"/approve {short}")
        await until(lambda: any(t.startswith("not taken") for t in texts()), "the refusal")
        assert (await op.questions()).approvals and not written.exists()
        # shown whole, in as many messages as it takes
        before = len(api.sent)
        api.say(f"show {short}")
        await until(
            lambda: any("end of the action" in t for t in texts()[before:]), "the whole action"
        )
        shown = "".join(texts()[before:])
        assert len(api.sent) - before > 1  # over one message's limit: split
        assert all(f"line {n:04d} of the file" in shown for n in range(400))
        api.say(f"approve {short}")
        await until(written.exists, "the write")
        assert written.read_text() == CONTENT

    _run(home, body)


def test_slack_offers_no_yes_for_a_cut_action_until_it_was_shown_whole(tmp_path: Path) -> None:
    api = SlackApi()
    home = slack_home(tmp_path, api)
    written = tmp_path / "x.txt"

    def said(needle: str) -> Callable[[], bool]:
        return lambda: any(needle in p.text for p in api.posted)

    async def body(op: Operator) -> None:
        await until(lambda: api.posted, "the start report")
        api.say("write the long file")
        question: Posted = await until(
            lambda: next((p for p in api.posted if p.buttons()), None), "the permission prompt"
        )
        labels = [b["text"]["text"] for b in question.buttons()]
        assert labels == ["No", "Never allow"]
        qid = _question_id(question.buttons()[0]["value"])
        short = qid[:8]
        assert f"show {short}" in question.text
        api.press(question, Press(qid, "always").data())  # "Always allow", unseen
        api.say(f"answer {short} always")
        await until(said("not taken"), "the refusal")
        assert (await op.questions()).approvals and not written.exists()
        before = len(api.posted)
        api.say(f"show {short}")
        await until(said("end of the action"), "the whole action")
        shown = "".join(p.text for p in api.posted[before:])
        missing = [n for n in range(400) if f"line {n:04d} of the file" not in shown]
        assert not missing, (missing[:5], [p.text[:300] for p in api.posted][-4:])
        assert re.search(r"sha256 [0-9a-f]{64}", shown)
        api.say(f"approve {short}")
        await until(written.exists, "the write")

    try:
        _run(home, body)
    finally:
        api.close()
