"""The SQLite event store: the owner's outbox and the kernel's boots (`store.EventStore`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import bus_sql, channels_sql, events_sql
from .backing import Backing
from .boot_reports import KeptBoot
from .bus_sql import BusEvent, BusEventKind
from .message_keys import MessageKey
from .records import OwnerMessage, now_rfc3339
from .rows import KernelBoot, TaskMessage
from .tx import Tx


class SQLiteEventStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def enqueue(self, messages: Sequence[OwnerMessage], point: str | None = None) -> None:
        def op(conn: Tx) -> None:
            at = now_rfc3339()
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)

        await self._db.write(op, point)

    async def pending(self) -> list[OwnerMessage]:
        return await self._db.read(events_sql.pending_messages)

    async def for_task(self, task_id: str) -> list[TaskMessage]:
        return await self._db.read(events_sql.messages_for_task, task_id)

    def mark_delivered(self, keys: Sequence[MessageKey]) -> None:
        """Mark messages delivered with the next commit (nobody waits for it; a crash
        before it only means the owner log's keys absorb a resend)."""
        keys = list(keys)

        def op(conn: Tx) -> None:
            at = now_rfc3339()
            for key in keys:
                events_sql.mark_message_txn(conn, key.text, "delivered", at)

        self._db.writer.defer(op, "message_delivered")

    async def start_boot(self, boot_id: str, pid: int, version: str) -> None:
        def op(conn: Tx) -> None:
            events_sql.start_boot_txn(conn, boot_id, pid, version, now_rfc3339())

        await self._db.write(op, None)

    async def end_boot(self, boot_id: str) -> None:
        def op(conn: Tx) -> None:
            events_sql.end_boot_txn(conn, boot_id, now_rfc3339())

        await self._db.write(op, None)

    async def last_boot(self) -> KernelBoot | None:
        return await self._db.read(events_sql.last_boot)

    async def boots(self, limit: int = 20) -> list[KeptBoot]:
        """The newest `limit` boots, newest first, with their recovery reports (started_at
        is indexed: the cost grows with `limit`, not with the boots kept)."""
        return await self._db.read(events_sql.boots, limit)

    async def prune(self, before: str, keep_boots: int, batch: int = 500) -> int:
        """Drop chat deliveries that ended before `before` and boots older than the newest
        `keep_boots` (at least one: the boot running now), at most `batch` of each a
        commit; how many rows went (the caller calls again while it is `batch` or more)."""

        def op(conn: Tx) -> int:
            n = channels_sql.prune_done_txn(conn, before, batch)
            return n + events_sql.prune_boots_txn(conn, max(keep_boots, 1), batch)

        return await self._db.write(op, None)

    async def bus(self, after: int, limit: int = 100) -> list[BusEvent]:
        return await self._db.read(bus_sql.since, after, limit)

    async def bus_for_task(self, task_id: str, kinds: frozenset[BusEventKind]) -> list[BusEvent]:
        return await self._db.read(bus_sql.for_task, task_id, kinds)

    async def bus_offset(self, subscriber: str) -> int | None:
        return await self._db.read(bus_sql.offset, subscriber)

    async def bus_last(self) -> int:
        """The newest event's number (0 when none): where a new subscriber may start."""
        return await self._db.read(bus_sql.last_seq)

    async def bus_high_water(self) -> int:
        """The number of the last event ever appended, pruned or not: the journal's
        position (bus_sql.high_water)."""
        return await self._db.read(bus_sql.high_water)

    async def bus_ack(self, subscriber: str, seq: int, *, point: str | None = "bus_ack") -> None:
        """`point`: the fault point of the commit (None: the kernel's own mark, which every
        start moves, is no subscriber's acknowledgement)."""

        def op(conn: Tx) -> None:
            bus_sql.ack_txn(conn, subscriber, seq, now_rfc3339())

        await self._db.write(op, point)

    async def publish(
        self, kind: BusEventKind, task_id: str | None, body: Mapping[str, object]
    ) -> None:
        """An event that is no task's move (a learning kept): its own commit."""

        def op(conn: Tx) -> None:
            bus_sql.append_txn(conn, kind, task_id, body, now_rfc3339())

        await self._db.write(op, None)
