"""The SQLite adapter store (`store.AdapterStore`): each adapter's position and settings,
and the owner's messages as each chat channel delivers them (channels_sql.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import channels_sql, events_sql
from .backing import Backing
from .channels_sql import Delivery
from .json_text import JsonObject
from .message_key_parse import read_message_key
from .message_keys import InDoubtKey, MessageKey, MessageKind
from .records import OwnerMessage, now_rfc3339
from .tx import Tx


class SQLiteAdapterStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def get(self, adapter: str) -> JsonObject | None:
        return await self._db.read(events_sql.get_adapter_state, adapter)

    async def put(self, adapter: str, state: Mapping[str, object]) -> None:
        def op(conn: Tx) -> None:
            events_sql.put_adapter_state_txn(conn, adapter, state, now_rfc3339())

        await self._db.write(op, None)

    async def ingested(
        self, adapter: str, state: Mapping[str, object], event_ids: Sequence[str]
    ) -> None:
        """An adapter's new position and the ids of the updates it handled up to it (each
        once: a redelivered one is found in `inbound_events`), in one commit."""

        def op(conn: Tx) -> None:
            at = now_rfc3339()
            for event_id in event_ids:
                if events_sql.seen_event(conn, event_id) is None:
                    events_sql.record_event_txn(conn, event_id, adapter, None, at)
            events_sql.put_adapter_state_txn(conn, adapter, state, at)

        await self._db.write(op, "adapter_position")

    async def seen(self, event_id: str) -> bool:
        """An inbound update already handled (it created a task, or was recorded)."""
        return await self._db.read(events_sql.seen_event, event_id) is not None

    # -- channels: each owner message, delivered once per chat channel ---------------

    async def register_channels(self, names: Sequence[str]) -> int:
        """The enabled channels are `names`; deliveries a dead kernel left `sending` are
        in doubt from now on (returned: how many)."""

        def op(conn: Tx) -> int:
            at = now_rfc3339()
            channels_sql.register_txn(conn, names, at)
            cut = channels_sql.sending_now(conn)
            for channel, key in cut:
                why = "the kernel stopped while it was sent"
                _doubt_txn(conn, channel, read_message_key(key), why, at)
            return len(cut)

        return await self._db.write(op, None)

    async def due(self, channel: str, limit: int = 20) -> list[Delivery]:
        return await self._db.read(channels_sql.due, channel, now_rfc3339(), limit)

    async def next_due_at(self, channel: str) -> str | None:
        """When the earliest delivery held back (a rate limit, a retry) comes due."""
        return await self._db.read(channels_sql.next_not_before, channel)

    async def sending(self, channel: str, key: MessageKey) -> None:
        """Committed before the channel's API is called: a crash from here on leaves the
        delivery in doubt, never sent again blind."""
        await self._mark(channel, key, "sending", attempt=True, point="channel_sending")

    async def sent(self, channel: str, key: MessageKey, remote_id: str | None) -> None:
        await self._mark(channel, key, "sent", remote_id=remote_id, point="channel_sent")

    async def later(self, channel: str, key: MessageKey, error: str, not_before: str) -> None:
        """Not sent (the channel said so: a rate limit, a server error): pending again."""
        await self._mark(channel, key, "pending", error=error, not_before=not_before)

    async def failed(self, channel: str, key: MessageKey, error: str) -> None:
        await self._mark(channel, key, "failed", error=error)

    async def in_doubt(self, channel: str, key: MessageKey, error: str) -> None:
        """It may have arrived: never sent again; the owner is told so on that channel,
        in the same commit (so once)."""

        def op(conn: Tx) -> None:
            _doubt_txn(conn, channel, key, error, now_rfc3339())

        await self._db.write(op, None)

    async def queue_for(self, channel: str, msg: OwnerMessage) -> bool:
        """A message for one channel only (a reply to the owner's words there), sent by
        its outbox like any other: in order, retried, once. False if queued before."""

        def op(conn: Tx) -> bool:
            return _queue_for_txn(conn, channel, msg, now_rfc3339())

        return await self._db.write(op, None)

    async def event_task(self, event_id: str) -> str | None:
        """The task an inbound update created or spoke to ('' for none; None: unseen)."""
        return await self._db.read(events_sql.seen_event, event_id)

    async def queued(self, key_prefix: str) -> bool:
        """Some owner message's key starts with `key_prefix`."""
        return await self._db.scan(channels_sql.queued, key_prefix)

    async def outbox_state(self, channel: str) -> channels_sql.OutboxState:
        return await self._db.read(channels_sql.outbox_state, channel)

    async def sent_ids(self, channel: str, key_prefix: str) -> list[tuple[MessageKey, str]]:
        """(key, remote id) of the messages sent on `channel` whose key starts so."""
        found = await self._db.read(channels_sql.remote_ids, channel, key_prefix)
        return [(read_message_key(key), remote) for key, remote in found]

    async def replied_to(
        self, channel: str, remote_id: str
    ) -> tuple[MessageKey, str | None, MessageKind] | None:
        """The owner message that is `remote_id` on `channel` (a reply names it): its
        key, its task and its kind; None for a message pfar did not send."""
        found = await self._db.read(channels_sql.replied_to, channel, remote_id)
        if found is None:
            return None
        key, task_id, kind = found
        return read_message_key(key), task_id, MessageKind(kind)

    async def delivery_counts(self, channel: str) -> dict[str, int]:
        return await self._db.scan(channels_sql.counts, channel)

    async def _mark(
        self,
        channel: str,
        key: MessageKey,
        status: str,
        *,
        remote_id: str | None = None,
        error: str | None = None,
        not_before: str | None = None,
        attempt: bool = False,
        point: str | None = None,
    ) -> None:
        def op(conn: Tx) -> None:
            channels_sql.mark_txn(
                conn,
                channel,
                key.text,
                status,
                now_rfc3339(),
                remote_id=remote_id,
                error=error,
                not_before=not_before,
                attempt=attempt,
            )

        await self._db.write(op, point)


_QUOTED = 200  # characters of the missing message quoted in the notice


def _doubt_txn(conn: Tx, channel: str, key: MessageKey, error: str, at: str) -> None:
    """The delivery is in doubt; a notice naming it is queued for that channel alone (the
    others have it, or will). A notice in doubt itself is not told again."""
    channels_sql.mark_txn(conn, channel, key.text, "in_doubt", at, error=error)
    if isinstance(key, InDoubtKey):
        return
    body = channels_sql.body_of(conn, key.text) or ""
    quoted = body[:_QUOTED] + ("…" if len(body) > _QUOTED else "")
    notice = OwnerMessage(
        InDoubtKey(channel, key),
        MessageKind.notice,
        "A message from pfar may not have arrived here (the connection broke as it was "
        f"sent, so it is not sent again: you would have it twice). It began:\n{quoted}",
        None,
        f"channel:{channel}",  # no fan-out: only this channel missed it
    )
    _queue_for_txn(conn, channel, notice, at)


def _queue_for_txn(conn: Tx, channel: str, msg: OwnerMessage, at: str) -> bool:
    """`msg` for `channel` alone (its sink says so: no fan-out); False if queued before."""
    if not events_sql.enqueue_message_txn(conn, msg, at):
        return False
    seq = conn.execute(
        "SELECT seq FROM owner_outbox WHERE message_key = ?", (msg.message_key.text,)
    ).fetchone()[0]
    channels_sql.deliver_to_txn(conn, channel, msg.message_key.text, int(seq), at)
    return True
