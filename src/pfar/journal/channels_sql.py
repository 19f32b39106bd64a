"""The channel family's SQL: `channels` and `channel_outbox`, in one place.

Every owner message (sink "owner") fans out to each enabled channel in the commit that
queues it (`fan_out_txn`, called by `events_sql.enqueue_message_txn`). A delivery goes
pending → sending (committed before the channel's API is called) → sent (with the
message's id on the channel). A kernel that dies between the two leaves it `sending`;
the next start marks it `in_doubt`: it may have reached the owner, so it is never sent
again blind (the owner is told once, on that channel, that it may be missing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .records import OwnerMessage
from .tx import Tx


@dataclass(frozen=True, slots=True)
class Delivery:
    """One owner message due on one channel."""

    channel: str
    message: OwnerMessage
    attempts: int
    seq: int


def register_txn(conn: Tx, names: Sequence[str], at: str) -> None:
    """The enabled channels are exactly `names` (from config); others stay, disabled, so
    their deliveries are kept for a look but nothing new fans out to them."""
    conn.execute("UPDATE channels SET enabled = 0, updated_at = ?", (at,))
    conn.executemany(
        "INSERT INTO channels(name, enabled, updated_at) VALUES (?, 1, ?) "
        "ON CONFLICT(name) DO UPDATE SET enabled = 1, updated_at = excluded.updated_at",
        [(n, at) for n in names],
    )


def fan_out_txn(conn: Tx, key: str, seq: int, at: str) -> None:
    conn.execute(
        "INSERT INTO channel_outbox(channel, message_key, seq, updated_at) "
        "SELECT name, ?, ?, ? FROM channels WHERE enabled = 1 ON CONFLICT DO NOTHING",
        (key, seq, at),
    )


def due(conn: Tx, channel: str, now: str, limit: int) -> list[Delivery]:
    """The pending deliveries in queue order, up to the first one held back (a rate
    limit, a retry): nothing overtakes a held message, so the owner reads them in order."""
    rows = conn.execute(
        "SELECT o.message_key, o.kind, o.body, o.task_id, o.sink, c.attempts, c.seq "
        "FROM channel_outbox c JOIN owner_outbox o ON o.message_key = c.message_key "
        "WHERE c.channel = ? AND c.status = 'pending' AND c.seq < coalesce(("
        "SELECT min(h.seq) FROM channel_outbox h WHERE h.channel = c.channel "
        "AND h.status = 'pending' AND h.not_before > ?), 9223372036854775807) "
        "ORDER BY c.seq LIMIT ?",
        (channel, now, limit),
    ).fetchall()
    return [Delivery(channel, OwnerMessage.from_row(r), r[5], r[6]) for r in rows]


def next_not_before(conn: Tx, channel: str) -> str | None:
    row = conn.execute(
        "SELECT min(not_before) FROM channel_outbox WHERE channel = ? AND status = 'pending'",
        (channel,),
    ).fetchone()
    return None if row is None else row[0]


def mark_txn(
    conn: Tx,
    channel: str,
    key: str,
    status: str,
    at: str,
    *,
    remote_id: str | None = None,
    error: str | None = None,
    not_before: str | None = None,
    attempt: bool = False,
) -> None:
    conn.execute(
        "UPDATE channel_outbox SET status = ?, updated_at = ?, "
        "remote_id = coalesce(?, remote_id), last_error = ?, not_before = ?, "
        "attempts = attempts + ? WHERE channel = ? AND message_key = ?",
        (status, at, remote_id, error, not_before, 1 if attempt else 0, channel, key),
    )


def sending_now(conn: Tx) -> list[tuple[str, str]]:
    """(channel, message key) of the deliveries a dead kernel left `sending`."""
    rows = conn.execute("SELECT channel, message_key FROM channel_outbox WHERE status = 'sending'")
    return [(r[0], r[1]) for r in rows]


def deliver_to_txn(conn: Tx, channel: str, key: str, seq: int, at: str) -> None:
    """A message for one channel only (what it says concerns that channel)."""
    conn.execute(
        "INSERT INTO channel_outbox(channel, message_key, seq, updated_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (channel, key, seq, at),
    )


def queued(conn: Tx, key_prefix: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM owner_outbox WHERE message_key >= ? AND message_key < ? LIMIT 1",
        (key_prefix, key_prefix + "\uffff"),
    ).fetchone()
    return row is not None


def body_of(conn: Tx, key: str) -> str | None:
    row = conn.execute("SELECT body FROM owner_outbox WHERE message_key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


@dataclass(frozen=True, slots=True)
class OutboxState:
    """What waits on a channel: the first pending delivery's last error and next try."""

    pending: int
    last_error: str | None
    next_try: str | None


def outbox_state(conn: Tx, channel: str) -> OutboxState:
    (count,) = conn.execute(
        "SELECT count(*) FROM channel_outbox WHERE channel = ? AND status = 'pending'",
        (channel,),
    ).fetchone()
    first = conn.execute(
        "SELECT last_error, not_before FROM channel_outbox WHERE channel = ? "
        "AND status = 'pending' ORDER BY seq LIMIT 1",
        (channel,),
    ).fetchone()
    return OutboxState(int(count), *(first if first else (None, None)))


def supersede_prompts_txn(conn: Tx, at: str) -> None:
    """An earlier boot's questions not yet on a channel: this boot re-sends them."""
    conn.execute(
        "UPDATE channel_outbox SET status = 'superseded', updated_at = ? "
        "WHERE status IN ('pending', 'in_doubt') AND message_key IN "
        "(SELECT message_key FROM owner_outbox WHERE kind IN ('approval', 'credential'))",
        (at,),
    )


def remote_ids(conn: Tx, channel: str, key_prefix: str) -> list[tuple[str, str]]:
    """(message key, remote id) of the sent deliveries whose key starts with `key_prefix`
    (an approval's earlier prompts, whose buttons a re-send replaces)."""
    rows = conn.execute(
        "SELECT message_key, remote_id FROM channel_outbox WHERE channel = ? AND status = 'sent' "
        "AND message_key >= ? AND message_key < ? AND remote_id IS NOT NULL",
        (channel, key_prefix, key_prefix + "\uffff"),
    )
    return [(r[0], r[1]) for r in rows]


def counts(conn: Tx, channel: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM channel_outbox WHERE channel = ? GROUP BY status",
        (channel,),
    )
    return {r[0]: int(r[1]) for r in rows}


def replied_to(conn: Tx, channel: str, remote_id: str) -> tuple[str, str | None, str] | None:
    """The owner message that has `remote_id` on `channel`: its key, task and kind."""
    row = conn.execute(
        "SELECT o.message_key, o.task_id, o.kind FROM channel_outbox c "
        "JOIN owner_outbox o ON o.message_key = c.message_key "
        "WHERE c.channel = ? AND c.remote_id = ?",
        (channel, remote_id),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def prune_done_txn(conn: Tx, before: str, limit: int) -> int:
    """Up to `limit` deliveries that ended (sent, failed, superseded) before `before`;
    pending, sending and in-doubt ones are kept. How many."""
    cur = conn.execute(
        "DELETE FROM channel_outbox WHERE (channel, message_key) IN ("
        "SELECT channel, message_key FROM channel_outbox "
        "WHERE status IN ('sent', 'failed', 'superseded') AND updated_at < ? LIMIT ?)",
        (before, limit),
    )
    return cur.rowcount
