"""The SQL of `resource_locks`: locks held by tool calls, with their holder process and
lease (seed 001, 4.3 and "Lock Recovery")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .tx import Tx

# (pid, the pid's start time) -> whether that very process still runs (on this host)
Alive = Callable[[int, int], bool]


@dataclass(frozen=True, slots=True)
class LockOwner:
    """The kernel that holds a lock: its boot, host, pid and the pid's start time."""

    boot_id: str
    host: str
    pid: int
    pid_started: int


@dataclass(frozen=True, slots=True)
class LockClaim:
    kind: str
    name: str
    mode: str  # shared | exclusive


@dataclass(frozen=True, slots=True)
class HeldLock:
    kind: str
    name: str
    holder: str
    mode: str
    task_id: str
    boot_id: str
    host: str
    pid: int
    pid_started: int
    lease_until: str
    acquired_at: str


_COLUMNS = (
    "kind, name, holder, mode, task_id, boot_id, host, pid, pid_started, lease_until, acquired_at"
)


def _held(row: Sequence[object]) -> HeldLock:
    return HeldLock(*row)  # type: ignore[arg-type]


def acquire_txn(
    conn: Tx,
    claims: Sequence[LockClaim],
    holder: str,
    task_id: str,
    owner: LockOwner,
    now: str,
    lease_until: str,
    alive: Alive,
) -> tuple[HeldLock | None, int]:
    """Take every claim, or none: the first live, unexpired lock of another holder that
    a claim conflicts with (nothing taken), or None (all taken). Locks in the way whose
    holder process is gone (on this host) or whose lease expired are taken over:
    returned with how many were."""
    taken_over = 0
    for claim in claims:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM resource_locks WHERE kind = ? AND name = ? AND holder != ?",
            (claim.kind, claim.name, holder),
        ).fetchall()
        for row in rows:
            other = _held(row)
            if claim.mode == "shared" and other.mode == "shared":
                continue
            expired = other.lease_until < now
            gone = other.host == owner.host and not (
                other.boot_id == owner.boot_id or alive(other.pid, other.pid_started)
            )
            if not (expired or gone):
                return other, taken_over
            conn.execute(
                "DELETE FROM resource_locks WHERE kind = ? AND name = ? AND holder = ?",
                (other.kind, other.name, other.holder),
            )
            taken_over += 1
    for claim in claims:
        conn.execute(
            f"INSERT INTO resource_locks({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(kind, name, holder) DO UPDATE SET "
            "mode = CASE WHEN resource_locks.mode = 'exclusive' THEN 'exclusive' "
            "ELSE excluded.mode END, lease_until = excluded.lease_until",
            (
                claim.kind,
                claim.name,
                holder,
                claim.mode,
                task_id,
                owner.boot_id,
                owner.host,
                owner.pid,
                owner.pid_started,
                lease_until,
                now,
            ),
        )
    return None, taken_over


def release_txn(conn: Tx, holder: str) -> None:
    conn.execute("DELETE FROM resource_locks WHERE holder = ?", (holder,))


def renew_txn(conn: Tx, boot_id: str, lease_until: str) -> int:
    cur = conn.execute(
        "UPDATE resource_locks SET lease_until = ? WHERE boot_id = ?", (lease_until, boot_id)
    )
    return cur.rowcount


def clear_stale_txn(conn: Tx, owner: LockOwner, now: str, alive: Alive) -> int:
    """Drop the locks whose holder is gone: another boot's on this host whose process no
    longer runs, or any whose lease expired."""
    gone = 0
    for row in conn.execute(f"SELECT {_COLUMNS} FROM resource_locks").fetchall():
        held = _held(row)
        if held.boot_id == owner.boot_id:
            continue
        dead = held.host == owner.host and not alive(held.pid, held.pid_started)
        if dead or held.lease_until < now:
            conn.execute(
                "DELETE FROM resource_locks WHERE kind = ? AND name = ? AND holder = ?",
                (held.kind, held.name, held.holder),
            )
            gone += 1
    return gone


def wait_txn(conn: Tx, holder: str, task_id: str, boot_id: str, reason: str, since: str) -> None:
    conn.execute(
        "INSERT INTO lock_waits(holder, task_id, boot_id, reason, since) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(holder) DO UPDATE SET reason = excluded.reason",
        (holder, task_id, boot_id, reason, since),
    )


def unwait_txn(conn: Tx, holder: str) -> None:
    conn.execute("DELETE FROM lock_waits WHERE holder = ?", (holder,))


def clear_waits_txn(conn: Tx, boot_id: str) -> None:
    conn.execute("DELETE FROM lock_waits WHERE boot_id != ?", (boot_id,))


def waits(conn: Tx) -> dict[str, str]:
    """Each waiting task's reason (its oldest wait)."""
    found: dict[str, str] = {}
    for task_id, reason in conn.execute(
        "SELECT task_id, reason FROM lock_waits ORDER BY since DESC"
    ):
        found[task_id] = reason
    return found


def held(conn: Tx) -> list[HeldLock]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM resource_locks ORDER BY kind, name").fetchall()
    return [_held(r) for r in rows]
