"""Chat channels under ordinary network faults, through a real kernel and the real
python-telegram-bot client against the loopback Bot API: a failed send is retried on
the channel's backoff while the rest of the channel works (and `pfar channels` says
so), a send cut off with no answer is not repeated and the owner is told once, and a
429 holds every later message until its `retry_after`, in order."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from pfar.kernel.api import Operator
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import db, make_home
from .channel_support import kernel_with_channels, known, until
from .telegram_server import OWNER, TOKEN, BotApi, Sent, unescape

REPORT = "System restarted"  # the start report: the first message a new home sends


def _home(tmp_path: Path, api: BotApi, backoff: float = 0.05) -> Home:
    config = f"""
[recovery]
adapter_retry_backoff_seconds = {backoff}
adapter_retry_backoff_max_seconds = {backoff * 2}
[channels]
directory = "{tmp_path}"
[channels.telegram]
owner_user_id = {OWNER}
api_url = "{api.url}"
poll_timeout_seconds = 1
[loop]
tools = ["Write"]
"""
    home = make_home(tmp_path / "home", config=config)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("telegram_bot_token", TOKEN)
    store.close()
    return home


def _from_outbox(api: BotApi) -> list[Sent]:
    """pfar's own messages (not the direct answers to the owner's words)."""
    return [s for s in api.sent if s.reply_to is None]


def _texts(sent: list[Sent]) -> list[str]:
    return [unescape(s.text) for s in sent]


def test_a_502_is_retried_on_the_backoff_while_the_channel_goes_on(tmp_path: Path) -> None:
    api = BotApi()
    api.fail_next("sendMessage", 502, "Bad Gateway")  # the start report's first try
    home = _home(tmp_path, api, backoff=1.5)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            op = Operator(kernel)

            async def held() -> bool:
                (view,) = await op.channels()
                return (
                    view.state == "connected"
                    and view.deliveries.get("pending") == 1
                    and "Bad Gateway" in (view.send_error or "")
                    and view.next_try is not None
                )

            for _ in range(500):
                if await held():
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError(f"the outbox never showed the held report: {api.sent}")
            # polling goes on meanwhile
            api.say("hello")
            await until(lambda: "You said: hello" in " ".join(_texts(api.sent)), "the answer")
            texts = _texts(_from_outbox(api))
            assert texts[0].startswith(REPORT), texts  # sent again, first, once
            assert len([t for t in texts if t.startswith(REPORT)]) == 1, texts
            (view,) = await op.channels()
            assert view.send_error is None and "pending" not in view.deliveries, view

    asyncio.run(body())


def test_a_send_cut_off_is_not_repeated_and_the_owner_is_told_once(tmp_path: Path) -> None:
    api = BotApi()
    api.cut_next("sendMessage", after_handling=False)  # pfar cannot know which
    home = _home(tmp_path, api)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(
                lambda: any("may not have arrived" in t for t in _texts(api.sent)),
                "the notice that the report may be missing",
            )
            api.say("hello")
            await until(lambda: "You said: hello" in " ".join(_texts(api.sent)), "the answer")
            texts = _texts(_from_outbox(api))
            assert not any(t.startswith(REPORT) for t in texts), texts  # never re-sent
            (notice,) = [t for t in texts if "may not have arrived" in t]
            assert REPORT in notice  # it names the message
            (view,) = await Operator(kernel).channels()
            assert view.deliveries.get("in_doubt") == 1, view

    asyncio.run(body())


def test_a_429_holds_every_later_message_until_retry_after_in_order(tmp_path: Path) -> None:
    api = BotApi()
    api.fail_next("sendMessage", 429, "Too Many Requests: retry after 2", retry_after=2)
    home = _home(tmp_path, api)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: api.refusals, "the 429")
            api.say("one")
            api.say("two")
            await until(lambda: "You said: two" in " ".join(_texts(api.sent)), "the answers")
            for _ in range(500):  # each delivery's `sent` committed
                if set(await kernel.journal.adapters.delivery_counts("telegram")) == {"sent"}:
                    break
                await asyncio.sleep(0.01)
        (refused,) = api.refusals
        out = api.sent  # the answers to the owner's words go through the outbox too
        texts = _texts(out)
        assert texts[0].startswith(REPORT), texts
        assert any("You said: one" in t for t in texts), texts
        # the chat has them in the order they were queued (the two tasks may end in
        # either order: the outbox's order is the one kept)
        with contextlib.closing(db(home)) as conn:
            queued = [
                int(r[0])
                for r in conn.execute(
                    "SELECT remote_id FROM channel_outbox WHERE channel = 'telegram' "
                    "AND status = 'sent' ORDER BY seq"
                )
            ]
        assert queued == [s.message_id for s in out], (queued, texts)
        # the server's own clock: nothing of pfar's reached the chat before retry_after
        assert all(s.at >= refused[1] + 2 for s in out), [(s.at - refused[1]) for s in out]

    asyncio.run(body())


def test_credential_stored_arrives_without_quoting_the_deleted_message(tmp_path: Path) -> None:
    api = BotApi()
    home = _home(tmp_path, api)
    home.config.write_text(
        home.config.read_text().replace(
            'tools = ["Write"]',
            'tools = ["admin.prompt_credential"]\nalways_allow = ["admin.prompt_credential"]',
        )
    )

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            api.say("key please")
            prompt: Sent = await until(
                lambda: next((s for s in api.sent if "credential" in unescape(s.text)), None),
                "the credential prompt",
            )
            await known(kernel, "telegram", prompt.message_id)
            owners = api.say("s3cr3t-value", reply_to=prompt.message_id)
            assert owners
            stored: Sent = await until(
                lambda: next(
                    (s for s in api.sent if "credential stored" in unescape(s.text)), None
                ),
                "the confirmation",
            )
            assert stored.reply_to is None  # the owner's message is gone from the chat
            assert api.deleted

    asyncio.run(body())


def test_a_reply_to_a_command_waits_out_a_429_and_arrives_once(tmp_path: Path) -> None:
    api = BotApi()
    home = _home(tmp_path, api)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: api.sent, "the start report")
            api.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
            api.say("tasks")
            await until(lambda: [s for s in api.sent if s.reply_to], "the reply", 20)
            for _ in range(500):  # its `sent` committed
                if set(await kernel.journal.adapters.delivery_counts("telegram")) == {"sent"}:
                    break
                await asyncio.sleep(0.01)
        (refused,) = api.refusals
        (reply,) = [s for s in api.sent if s.reply_to]  # once: not dropped, not twice
        assert reply.at >= refused[1] + 1  # after the time the 429 gave
        assert len(api.sent) == 2, _texts(api.sent)

    asyncio.run(body())
