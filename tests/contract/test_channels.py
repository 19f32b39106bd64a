"""The chat channels' outbox (the adapter family): each owner message delivered once per
enabled channel, in order, held back and retried, and never sent twice blind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pfar.journal import OwnerMessage
from pfar.journal.channels_sql import OutboxState
from pfar.journal.message_keys import ApprovalKey, MessageKind, ReplyKey
from pfar.journal.records import rfc3339
from pfar.journal.store import Store

from . import builders as b
from .helpers import run
from .verbs import covers

SOON = rfc3339(datetime.now(UTC) + timedelta(hours=1))
PAST = rfc3339(datetime.now(UTC) - timedelta(hours=1))


def _keys(store: Store, channel: str) -> list[str]:
    return [d.message.message_key.text for d in run(store.adapters.due(channel))]


@covers("adapters.register_channels", "adapters.due")
def test_each_message_is_due_on_every_enabled_channel_in_order(store: Store) -> None:
    run(store.events.enqueue([b.message("before")]))  # no channel then: on none
    assert run(store.adapters.register_channels(["chat", "mail"])) == 0
    msgs = [b.message(f"m{i}", body=f"body {i}", task_id="t-1") for i in range(3)]
    run(store.events.enqueue(msgs))
    due = run(store.adapters.due("chat"))
    assert [d.message for d in due] == msgs
    assert [d.channel for d in due] == ["chat"] * 3 and [d.attempts for d in due] == [0] * 3
    assert [d.seq for d in due] == sorted(d.seq for d in due)
    assert _keys(store, "mail") == ["m0", "m1", "m2"]
    assert [d.message for d in run(store.adapters.due("chat", limit=2))] == msgs[:2]
    # a channel no longer enabled keeps what it had; nothing new fans out to it
    run(store.adapters.register_channels(["chat"]))
    run(store.events.enqueue([b.message("m3")]))
    assert _keys(store, "chat") == ["m0", "m1", "m2", "m3"]
    assert _keys(store, "mail") == ["m0", "m1", "m2"]
    assert run(store.adapters.due("nowhere")) == []


@covers(
    "adapters.sending",
    "adapters.later",
    "adapters.next_due_at",
    "adapters.outbox_state",
    "adapters.sent",
    "adapters.failed",
)
def test_a_delivery_held_back_holds_back_the_ones_after_it(store: Store) -> None:
    run(store.adapters.register_channels(["chat", "mail"]))
    run(store.events.enqueue([b.message(k) for k in ("m0", "m1", "m2")]))
    assert run(store.adapters.next_due_at("chat")) is None
    assert run(store.adapters.outbox_state("chat")) == OutboxState(3, None, None)
    run(store.adapters.sending("chat", b.key("m0")))
    assert _keys(store, "chat") == ["m1", "m2"]
    # the channel said "later": m0 is pending again, and nothing overtakes it
    run(store.adapters.later("chat", b.key("m0"), "429 too many", SOON))
    assert _keys(store, "chat") == []
    assert run(store.adapters.next_due_at("chat")) == SOON
    assert run(store.adapters.outbox_state("chat")) == OutboxState(3, "429 too many", SOON)
    assert _keys(store, "mail") == ["m0", "m1", "m2"]  # another channel goes on
    # come due: sent again, counting its attempt
    run(store.adapters.later("chat", b.key("m0"), "503", PAST))
    (first, *rest) = run(store.adapters.due("chat"))
    assert (first.message.message_key.text, first.attempts) == ("m0", 1)
    assert [d.message.message_key.text for d in rest] == ["m1", "m2"]
    run(store.adapters.sent("chat", b.key("m0"), "r-0"))
    run(store.adapters.failed("chat", b.key("m1"), "refused for good"))
    assert _keys(store, "chat") == ["m2"]
    assert run(store.adapters.delivery_counts("chat")) == {"sent": 1, "failed": 1, "pending": 1}
    assert run(store.adapters.outbox_state("chat")) == OutboxState(1, None, None)


@covers("adapters.in_doubt", "adapters.register_channels", "adapters.queued")
def test_a_delivery_in_doubt_is_never_sent_again_and_told_once(store: Store) -> None:
    run(store.adapters.register_channels(["chat", "mail"]))
    run(store.events.enqueue([b.message("m0", body="the result ünï"), b.message("m1")]))
    run(store.adapters.sending("chat", b.key("m0")))
    run(store.adapters.in_doubt("chat", b.key("m0"), "connection reset"))
    run(store.adapters.in_doubt("chat", b.key("m0"), "connection reset"))  # said again: told once
    due = run(store.adapters.due("chat"))
    assert [d.message.message_key.text for d in due] == ["m1", "in-doubt:chat:m0"]
    notice = due[1].message
    assert notice.kind == "notice" and "the result ünï" in notice.body
    assert run(store.adapters.queued("in-doubt:chat:")) is True
    assert _keys(store, "mail") == ["m0", "m1"]  # only the channel that missed it is told
    # a notice in doubt itself is not told again
    run(store.adapters.sending("chat", b.key("in-doubt:chat:m0")))
    run(store.adapters.in_doubt("chat", b.key("in-doubt:chat:m0"), "reset"))
    assert run(store.adapters.queued("in-doubt:chat:in-doubt")) is False
    assert run(store.adapters.delivery_counts("chat")) == {"in_doubt": 2, "pending": 1}
    # a kernel that died while sending: at the next start its delivery is in doubt
    run(store.adapters.sending("chat", b.key("m1")))
    assert run(store.adapters.register_channels(["chat", "mail"])) == 1
    assert _keys(store, "chat") == ["in-doubt:chat:m1"]


@covers("adapters.queue_for", "adapters.queued")
def test_a_reply_is_queued_for_its_channel_alone_and_once(store: Store) -> None:
    run(store.adapters.register_channels(["chat", "mail"]))
    reply = OwnerMessage(ReplyKey("chat", "1"), MessageKind.reply, "on it", "t-1", "channel:chat")
    assert run(store.adapters.queue_for("chat", reply)) is True
    assert run(store.adapters.queue_for("chat", reply)) is False
    assert [d.message for d in run(store.adapters.due("chat"))] == [reply]
    assert run(store.adapters.due("mail")) == []
    assert run(store.adapters.queued("reply:chat:")) is True
    assert run(store.adapters.queued("reply:mail:")) is False


@covers("adapters.sent_ids", "adapters.replied_to")
def test_what_was_sent_is_found_by_its_remote_id(store: Store) -> None:
    run(store.adapters.register_channels(["chat", "mail"]))
    keys = ["approval:a1:0", "approval:a1:1", "approval:a2:0", "result:t1"]
    run(store.events.enqueue([b.message(k, "approval", task_id="t1") for k in keys]))
    for i, key in enumerate(keys):
        run(store.adapters.sent("chat", b.key(key), f"r-{i}"))
    run(store.adapters.sent("mail", b.key("approval:a1:0"), None))  # a channel without ids
    sent = run(store.adapters.sent_ids("chat", "approval:a1:"))
    assert sorted((k.text, remote) for k, remote in sent) == [
        ("approval:a1:0", "r-0"),
        ("approval:a1:1", "r-1"),
    ]
    assert run(store.adapters.sent_ids("mail", "approval:a1:")) == []
    assert run(store.adapters.replied_to("chat", "r-2")) == (
        ApprovalKey("a2", 0),
        "t1",
        MessageKind.approval,
    )
    assert run(store.adapters.replied_to("mail", "r-2")) is None
    assert run(store.adapters.replied_to("chat", "r-99")) is None
