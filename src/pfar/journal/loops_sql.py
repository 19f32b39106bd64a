"""The loop family's SQL: loop_tasks, loop_turns and permission_rules, in one place."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StaleConversation
from .turns import LoopSettings, PermissionRule, StoredTurn, Turn, dump, load_settings, load_turn
from .tx import Tx


def insert_settings_txn(conn: Tx, task_id: str, settings: LoopSettings) -> None:
    conn.execute(
        "INSERT INTO loop_tasks(task_id, settings_json, parent_task_id) VALUES (?, ?, ?)",
        (task_id, dump(settings), settings.parent_task_id),
    )


def update_settings_txn(conn: Tx, task_id: str, settings: LoopSettings) -> None:
    conn.execute(
        "UPDATE loop_tasks SET settings_json = ? WHERE task_id = ?", (dump(settings), task_id)
    )


def settings(conn: Tx, task_id: str) -> LoopSettings | None:
    row = conn.execute(
        "SELECT settings_json FROM loop_tasks WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else load_settings(task_id, row[0])


def parent(conn: Tx, task_id: str) -> str | None:
    """The task that started this one as its subtask, or None (not a subtask, or not a
    loop task)."""
    row = conn.execute(
        "SELECT parent_task_id FROM loop_tasks WHERE task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else row[0]


def children(conn: Tx, task_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT task_id FROM loop_tasks WHERE parent_task_id = ? ORDER BY task_id", (task_id,)
    )
    return [r[0] for r in rows]


def turns(conn: Tx, task_id: str, after: int = -1) -> list[StoredTurn]:
    rows = conn.execute(
        "SELECT seq, at, body_json FROM loop_turns WHERE task_id = ? AND seq > ? ORDER BY seq",
        (task_id, after),
    )
    return [StoredTurn(seq, at, load_turn(task_id, seq, body)) for seq, at, body in rows]


def last_seq(conn: Tx, task_id: str) -> int:
    row = conn.execute("SELECT max(seq) FROM loop_turns WHERE task_id = ?", (task_id,)).fetchone()
    return -1 if row[0] is None else int(row[0])


def append_txn(
    conn: Tx, task_id: str, new: Sequence[Turn], at: str, after: int | None
) -> list[StoredTurn]:
    """Append `new` after the conversation's last turn. `after` is the seq the caller
    saw last: a conversation that moved meanwhile refuses the append (IntegrityError on
    the key is avoided by checking first), so a stale runner cannot interleave turns."""
    last = last_seq(conn, task_id)
    if after is not None and after != last:
        raise StaleConversation(task_id, after, last)
    stored = []
    for i, turn in enumerate(new, start=last + 1):
        conn.execute(
            "INSERT INTO loop_turns(task_id, seq, kind, body_json, at) VALUES (?, ?, ?, ?, ?)",
            (task_id, i, turn.kind, dump(turn), at),
        )
        stored.append(StoredTurn(i, at, turn))
    return stored


def rules(conn: Tx) -> list[PermissionRule]:
    rows = conn.execute(
        "SELECT tool, pattern, decision, task_id FROM permission_rules ORDER BY tool, pattern"
    )
    return [PermissionRule(t, p, d, task) for t, p, d, task in rows]


def put_rule_txn(conn: Tx, rule: PermissionRule, at: str) -> None:
    conn.execute(
        "INSERT INTO permission_rules(tool, pattern, decision, task_id, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(tool, pattern) DO UPDATE SET "
        "decision = excluded.decision, task_id = excluded.task_id, "
        "created_at = excluded.created_at",
        (rule.tool, rule.pattern, rule.decision, rule.task_id, at),
    )


def forget_rule_txn(conn: Tx, tool: str, pattern: str) -> bool:
    cur = conn.execute(
        "DELETE FROM permission_rules WHERE tool = ? AND pattern = ?", (tool, pattern)
    )
    return cur.rowcount > 0


# -- layer 3: anomalies ------------------------------------------------------------


def anomalies(conn: Tx, task_id: str, step: int) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT kind, detail FROM loop_anomalies WHERE task_id = ? AND step = ? ORDER BY kind",
        (task_id, step),
    )
    return [(r[0], r[1]) for r in rows]


def host_first_seen(conn: Tx, host: str) -> tuple[str, int] | None:
    row = conn.execute("SELECT task_id, step FROM seen_hosts WHERE host = ?", (host,)).fetchone()
    return None if row is None else (row[0], int(row[1]))


def record_anomalies_txn(
    conn: Tx,
    task_id: str,
    step: int,
    found: Sequence[tuple[str, str]],
    host: str | None,
    at: str,
) -> None:
    conn.executemany(
        "INSERT INTO loop_anomalies(task_id, step, kind, detail, at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(task_id, step, kind, detail, at) for kind, detail in found],
    )
    if host is not None:
        conn.execute(
            "INSERT INTO seen_hosts(host, task_id, step, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (host, task_id, step, at),
        )
