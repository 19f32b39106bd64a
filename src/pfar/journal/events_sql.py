"""SQL for `inbound_events`, `adapter_state`, `owner_outbox` and `kernel_boots`."""

from __future__ import annotations

from collections.abc import Mapping

from . import boot_reports, channels_sql
from .boot_reports import KeptBoot, StoredReport
from .json_text import JsonObject
from .records import OwnerMessage, dumps, loads
from .rows import KernelBoot, TaskMessage
from .tx import Tx


def seen_event(conn: Tx, event_id: str) -> str | None:
    """The task an event created, if the event was seen before ('' when it created none)."""
    row = conn.execute(
        "SELECT task_id FROM inbound_events WHERE event_id = ?", (event_id,)
    ).fetchone()
    return None if row is None else (row[0] or "")


def record_event_txn(conn: Tx, event_id: str, adapter: str, task_id: str | None, at: str) -> None:
    conn.execute(
        "INSERT INTO inbound_events(event_id, adapter, task_id, received_at) VALUES (?, ?, ?, ?)",
        (event_id, adapter, task_id, at),
    )


def get_adapter_state(conn: Tx, adapter: str) -> JsonObject | None:
    row = conn.execute(
        "SELECT state_json FROM adapter_state WHERE adapter = ?", (adapter,)
    ).fetchone()
    return None if row is None else dict(loads(row[0]))


def put_adapter_state_txn(conn: Tx, adapter: str, state: Mapping[str, object], at: str) -> None:
    conn.execute(
        "INSERT INTO adapter_state(adapter, state_json, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(adapter) DO UPDATE SET state_json = excluded.state_json, "
        "updated_at = excluded.updated_at",
        (adapter, dumps(state), at),
    )


def enqueue_message_txn(conn: Tx, msg: OwnerMessage, at: str) -> bool:
    """Queue a message; False when its key was queued before (the resend is a no-op).
    Numbered in the INSERT: one statement, whose row says it was queued and as what."""
    queued = conn.execute(
        "INSERT INTO owner_outbox(message_key, seq, sink, kind, task_id, body, created_at) "
        f"VALUES (?, {conn.dialect.next_outbox_seq}, ?, ?, ?, ?, ?) "
        "ON CONFLICT(message_key) DO NOTHING RETURNING seq",
        (msg.message_key.text, msg.sink, msg.kind.value, msg.task_id, msg.body, at),
    ).fetchone()
    if queued is not None and msg.sink == "owner":
        channels_sql.fan_out_txn(conn, msg.message_key.text, queued[0], at)  # each channel, once
    return queued is not None


def pending_messages(conn: Tx, limit: int = 500) -> list[OwnerMessage]:
    rows = conn.execute(
        "SELECT message_key, kind, body, task_id, sink FROM owner_outbox "
        "WHERE status = 'pending' ORDER BY seq LIMIT ?",
        (limit,),
    ).fetchall()
    return [OwnerMessage.from_row(r) for r in rows]


def mark_message_txn(conn: Tx, key: str, status: str, at: str) -> None:
    conn.execute(
        "UPDATE owner_outbox SET status = ?, delivered_at = ? WHERE message_key = ?",
        (status, at, key),
    )


def supersede_prompts_txn(conn: Tx, at: str) -> int:
    """Prompts queued by an earlier boot are replaced by this boot's re-sent ones.

    An earlier boot's report that never went out is still delivered: what it says
    (an abandonment, say) is told nowhere else.
    """
    keys = [
        r[0]
        for r in conn.execute(
            "SELECT message_key FROM owner_outbox "
            "WHERE status = 'pending' AND kind IN ('approval', 'credential')"
        )
    ]
    conn.executemany(
        "UPDATE owner_outbox SET status = 'superseded', delivered_at = ? WHERE message_key = ?",
        [(at, k) for k in keys],
    )
    channels_sql.supersede_prompts_txn(conn, at)
    return len(keys)


def messages_for_task(conn: Tx, task_id: str) -> list[TaskMessage]:
    rows = conn.execute(
        "SELECT message_key, kind, body, status, created_at, delivered_at FROM owner_outbox "
        "WHERE task_id = ? ORDER BY seq",
        (task_id,),
    ).fetchall()
    return [
        TaskMessage(
            message_key=r[0],
            kind=r[1],
            body=r[2],
            status=r[3],
            created_at=r[4],
            delivered_at=r[5],
        )
        for r in rows
    ]


def last_boot(conn: Tx) -> KernelBoot | None:
    row = conn.execute(
        "SELECT boot_id, pid, started_at, ended_at, clean FROM kernel_boots "
        "ORDER BY started_at DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    return KernelBoot(
        boot_id=row[0], pid=row[1], started_at=row[2], ended_at=row[3], clean=bool(row[4])
    )


def boots(conn: Tx, limit: int) -> list[KeptBoot]:
    """The newest `limit` boots, newest first, each with its recovery report (read
    through `boot_reports.parse`, the one place a kept report is read)."""
    rows = conn.execute(
        "SELECT boot_id, started_at, ended_at, clean, report_json FROM kernel_boots "
        "ORDER BY started_at DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [
        KeptBoot(
            boot_id=r[0],
            started_at=r[1],
            ended_at=r[2],
            clean=bool(r[3]),
            report=boot_reports.parse(r[4]),
        )
        for r in rows
    ]


def keep_report_txn(conn: Tx, boot_id: str, report: StoredReport) -> None:
    """The boot's recovery report, kept with it (written once, by its own start)."""
    conn.execute(
        "UPDATE kernel_boots SET report_json = ? WHERE boot_id = ? AND report_json IS NULL",
        (boot_reports.dumps(report), boot_id),
    )


def start_boot_txn(conn: Tx, boot_id: str, pid: int, version: str, at: str) -> None:
    conn.execute(
        "INSERT INTO kernel_boots(boot_id, pid, version, started_at) VALUES (?, ?, ?, ?)",
        (boot_id, pid, version, at),
    )


def prune_boots_txn(conn: Tx, keep: int, limit: int) -> int:
    """Up to `limit` boots older than the newest `keep`; how many."""
    cur = conn.execute(
        "DELETE FROM kernel_boots WHERE boot_id IN (SELECT boot_id FROM kernel_boots "
        "ORDER BY started_at DESC LIMIT ? OFFSET ?)",
        (limit, keep),
    )
    return cur.rowcount


def end_boot_txn(conn: Tx, boot_id: str, at: str) -> None:
    conn.execute("UPDATE kernel_boots SET ended_at = ?, clean = 1 WHERE boot_id = ?", (at, boot_id))
