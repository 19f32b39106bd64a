"""The SQLite lock store (`store.LockStore`): resource locks with holders and leases."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from . import locks_sql
from .backing import Backing
from .locks_sql import Alive, HeldLock, LockClaim, LockOwner
from .records import now_rfc3339, parse_rfc3339, rfc3339
from .tx import Tx


class SQLiteLockStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def acquire(
        self,
        claims: Sequence[LockClaim],
        holder: str,
        task_id: str,
        owner: LockOwner,
        lease_seconds: float,
        alive: Alive,
    ) -> tuple[HeldLock | None, int]:
        """Take every claim for `holder` in one commit, or none (the lock in the way)."""

        def op(conn: Tx) -> tuple[HeldLock | None, int]:
            now = now_rfc3339()
            until = _later(now, lease_seconds)
            return locks_sql.acquire_txn(conn, claims, holder, task_id, owner, now, until, alive)

        return await self._db.write(op, "lock_acquired")

    def release(self, holder: str) -> None:
        """Rides on the next commit: a crash before it leaves a lock whose holder is
        gone, which the next claim takes over."""

        def op(conn: Tx) -> None:
            locks_sql.release_txn(conn, holder)

        self._db.writer.defer(op, "lock_released")

    async def renew(self, boot_id: str, lease_seconds: float) -> int:
        def op(conn: Tx) -> int:
            return locks_sql.renew_txn(conn, boot_id, _later(now_rfc3339(), lease_seconds))

        return await self._db.write(op, None)

    async def clear_stale(self, owner: LockOwner, alive: Alive) -> int:
        def op(conn: Tx) -> int:
            locks_sql.clear_waits_txn(conn, owner.boot_id)
            return locks_sql.clear_stale_txn(conn, owner, now_rfc3339(), alive)

        return await self._db.write(op, None)

    def waiting(self, holder: str, task_id: str, boot_id: str, reason: str) -> None:
        """A call waits for a lock (for `pfar tasks`): rides on the next commit."""
        since = now_rfc3339()

        def op(conn: Tx) -> None:
            locks_sql.wait_txn(conn, holder, task_id, boot_id, reason, since)

        self._db.writer.defer(op, None)

    def waited(self, holder: str) -> None:
        def op(conn: Tx) -> None:
            locks_sql.unwait_txn(conn, holder)

        self._db.writer.defer(op, None)

    async def waits(self) -> dict[str, str]:
        return await self._db.read(locks_sql.waits)

    async def held(self) -> list[HeldLock]:
        return await self._db.read(locks_sql.held)


def _later(now: str, seconds: float) -> str:
    return rfc3339(parse_rfc3339(now) + timedelta(seconds=seconds))
