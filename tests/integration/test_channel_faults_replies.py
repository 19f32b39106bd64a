"""The answers to the owner's words on Slack and WhatsApp under server errors, through a
real kernel and the real clients against the loopback servers: they go through the
channel's outbox like every other message, so a 5xx is retried (Slack) or left in doubt
and told once (WhatsApp) instead of the answer being dropped, and a 429 holds every later
answer until its time, in order, each sent once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pfar.kernel.api import Operator
from pfar.kernel.kernel import Kernel
from pfar.vault.home import Home

from ..support import db
from .channel_support import kernel_with_channels, until
from .slack_server import DM, OWNER, TEAM, SlackApi
from .test_slack import slack_home
from .test_whatsapp import _with as with_whatsapp
from .test_whatsapp import whatsapp_home
from .whatsapp_server import PHONE_ID, GraphApi, Meta, Sent

MESSAGES = f"{PHONE_ID}/messages"


@pytest.fixture
def slack() -> Iterator[SlackApi]:
    server = SlackApi()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def graph() -> Iterator[GraphApi]:
    server = GraphApi()
    try:
        yield server
    finally:
        server.close()


async def _all_sent(kernel: Kernel, channel: str) -> None:
    """Until every delivery on `channel` is committed as sent."""
    for _ in range(1000):
        if set(await kernel.journal.adapters.delivery_counts(channel)) == {"sent"}:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(await kernel.journal.adapters.delivery_counts(channel))


def test_slack_a_reply_to_a_command_is_retried_after_a_503_and_posted_once(
    tmp_path: Path, slack: SlackApi
) -> None:
    home = slack_home(tmp_path, slack)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: slack.posted, "the start report")
            await _all_sent(kernel, "slack")
            slack.fail_next("chat.postMessage", 503, {"ok": False, "error": "service_unavailable"})
            ts = slack.say("tasks")
            await until(lambda: [p for p in slack.posted if p.thread_ts == ts], "the reply")
            await _all_sent(kernel, "slack")
        (reply,) = [p for p in slack.posted if p.thread_ts == ts]  # once, in the thread
        assert "task" in reply.text.lower()
        posts = [c for c in slack.calls if c[0] == "chat.postMessage"]
        assert len(posts) == len(slack.posted) + 1  # the 503, then posted

    asyncio.run(body())


def test_slack_replies_wait_out_a_429_in_order_each_once(tmp_path: Path, slack: SlackApi) -> None:
    home = slack_home(tmp_path, slack)

    async def body() -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: slack.posted, "the start report")
            await _all_sent(kernel, "slack")
            for _ in range(2):  # two 429s in a row: waited out both times
                slack.fail_next(
                    "chat.postMessage",
                    429,
                    {"ok": False, "error": "ratelimited"},
                    {"Retry-After": "1"},
                )
            said = [slack.say("tasks"), slack.say("tasks"), slack.say("tasks")]
            await until(lambda: len([p for p in slack.posted if p.thread_ts]) >= 3, "3 replies")
            await _all_sent(kernel, "slack")
        replies = [p.thread_ts for p in slack.posted if p.thread_ts]
        assert replies == said  # in the order the owner wrote, each once

    asyncio.run(body())


def _quoting(sent: list[Sent]) -> list[str | None]:
    return [(s.payload.get("context") or {}).get("message_id") for s in sent]


def test_whatsapp_replies_wait_out_a_429_in_order_each_once(
    tmp_path: Path, graph: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, graph)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(lambda: graph.sent, "the start report")
        await _all_sent(kernel, "whatsapp")
        rate = {"message": "Rate limit hit", "code": 130429}
        graph.fail_next(MESSAGES, 429, rate, {"Retry-After": "1"})
        said: list[Any] = [meta.message("tasks"), meta.message("tasks"), meta.message("tasks")]
        for message in said:
            assert (await meta.deliver(message)).status_code == 200
        await until(lambda: len([q for q in _quoting(graph.sent) if q]) >= 3, "3 replies", 20)
        await _all_sent(kernel, "whatsapp")
        # in the order the owner wrote, each once, each quoting its message
        assert [q for q in _quoting(graph.sent) if q] == [m["id"] for m in said]

    asyncio.run(with_whatsapp(home, body))


def test_whatsapp_a_reply_cut_by_a_5xx_is_not_repeated_and_the_owner_is_told(
    tmp_path: Path, graph: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, graph)

    async def body(kernel: Kernel, op: Operator, meta: Meta) -> None:
        await until(lambda: graph.sent, "the start report")
        await _all_sent(kernel, "whatsapp")
        graph.fail_next(MESSAGES, 503, {"message": "Service temporarily unavailable"})
        message = meta.message("tasks")
        assert (await meta.deliver(message)).status_code == 200
        told = await until(
            lambda: [s for s in graph.sent if "may not have arrived" in s.text], "the notice"
        )
        assert len(told) == 1
        # the Graph API may have taken it: not sent again blind
        assert [q for q in _quoting(graph.sent) if q] == []
        posts = [c for c in graph.calls if c == ("POST", MESSAGES)]
        assert len(posts) == len(graph.sent) + 1

    asyncio.run(with_whatsapp(home, body))


def _forget_reply(home: Home, channel: str, event_id: str) -> None:
    """The journal as a kill between a message's task and its answer's commit leaves it:
    the task there, the answer never queued."""
    with db(home) as conn:
        prefix = f"reply:{channel}:{event_id}@"
        for table in ("channel_outbox", "owner_outbox"):
            gone = conn.execute(
                f"DELETE FROM {table} WHERE message_key >= ? AND message_key < ?",
                (prefix, prefix + "\uffff"),
            ).rowcount
            assert gone == 1, table


def test_whatsapp_a_message_redelivered_after_its_answer_was_lost_is_answered(
    tmp_path: Path, graph: GraphApi
) -> None:
    home = whatsapp_home(tmp_path, graph)
    hello = Meta("").message("hello")

    async def first(kernel: Kernel, op: Operator, meta: Meta) -> None:
        assert (await meta.deliver(hello)).status_code == 200
        await until(lambda: _quoting(graph.sent).count(hello["id"]), "the task's start")
        await _all_sent(kernel, "whatsapp")

    async def again(kernel: Kernel, op: Operator, meta: Meta) -> None:
        # Meta never got its 200 (the kill): it delivers the message again
        assert (await meta.deliver(hello)).status_code == 200
        told = await until(
            lambda: [s for s in graph.sent if "just before pfar restarted" in s.text],
            "the lost answer's replacement",
        )
        assert _quoting(told) == [hello["id"]]
        assert len(await op.tasks()) == 1  # and no second task

    asyncio.run(with_whatsapp(home, first))
    _forget_reply(home, "whatsapp", f"whatsapp:{hello['id']}")
    asyncio.run(with_whatsapp(home, again))


def test_slack_a_message_redelivered_after_its_answer_was_lost_is_answered(
    tmp_path: Path, slack: SlackApi
) -> None:
    home = slack_home(tmp_path, slack)

    async def first() -> str:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: slack.posted, "the start report")
            ts = slack.say("hello")
            await until(lambda: [p for p in slack.posted if p.thread_ts == ts], "the start")
            await _all_sent(kernel, "slack")
            return ts

    async def again(ts: str) -> None:
        async with kernel_with_channels(home) as (kernel, _):
            await until(lambda: slack.connected, "the new connection")
            # Slack's retry of the envelope whose acknowledgement the kill prevented
            event = {"type": "message", "channel": DM, "user": OWNER, "text": "hello", "ts": ts}
            slack._push(
                {
                    "type": "events_api",
                    "envelope_id": "env-retry",
                    "retry_attempt": 1,
                    "retry_reason": "timeout",
                    "payload": {"type": "event_callback", "team_id": TEAM, "event": event},
                }
            )
            told = await until(
                lambda: [p for p in slack.posted if "just before pfar restarted" in p.text],
                "the lost answer's replacement",
            )
            assert [p.thread_ts for p in told] == [ts]  # in the thread of the owner's message
            assert len(await Operator(kernel).tasks()) == 1  # and no second task

    ts = asyncio.run(first())
    _forget_reply(home, "slack", f"slack:{DM}:{ts}")
    asyncio.run(again(ts))
