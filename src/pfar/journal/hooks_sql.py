"""The SQL of `hook_verdicts`: hook decisions kept with the task they changed."""

from __future__ import annotations

from typing import Any

from .records import dumps, loads
from .tx import Tx

# a completed task's learnings (kernel/learning.py) are kept here too: what was decided
# (before any is stored), then the mark that they are stored and their events published
LEARNINGS_DECIDED = "learnings:decided"
LEARNINGS_KEPT = "learnings:kept"


def get(conn: Tx, task_id: str, key: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT verdict_json FROM hook_verdicts WHERE task_id = ? AND key = ?", (task_id, key)
    ).fetchone()
    return None if row is None else dict(loads(row[0]) or {})


def put_txn(conn: Tx, task_id: str, key: str, verdict: dict[str, Any], at: str) -> bool:
    """Keep the first verdict for `key` (a second firing never replaces it): whether this
    one was kept."""
    cur = conn.execute(
        "INSERT INTO hook_verdicts(task_id, key, verdict_json, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(task_id, key) DO NOTHING",
        (task_id, key, dumps(verdict), at),
    )
    return cur.rowcount == 1
