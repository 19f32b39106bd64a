"""The SQL of `hook_verdicts`: hook decisions kept with the task they changed."""

from __future__ import annotations

from collections.abc import Mapping

from .json_text import JsonObject
from .records import dumps, loads
from .rows import DecidedLearning
from .tx import Tx

# a completed task's learnings (kernel/learning.py) are kept here too: what was decided
# (before any is stored), then the mark that they are stored and their events published
LEARNINGS_DECIDED = "learnings:decided"
LEARNINGS_KEPT = "learnings:kept"


def get(conn: Tx, task_id: str, key: str) -> JsonObject | None:
    row = conn.execute(
        "SELECT verdict_json FROM hook_verdicts WHERE task_id = ? AND key = ?", (task_id, key)
    ).fetchone()
    return None if row is None else dict(loads(row[0]) or {})


def put_txn(conn: Tx, task_id: str, key: str, verdict: Mapping[str, object], at: str) -> bool:
    """Keep the first verdict for `key` (a second firing never replaces it): whether this
    one was kept."""
    cur = conn.execute(
        "INSERT INTO hook_verdicts(task_id, key, verdict_json, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(task_id, key) DO NOTHING",
        (task_id, key, dumps(verdict), at),
    )
    return cur.rowcount == 1


def decided_learnings(verdict: JsonObject) -> list[DecidedLearning]:
    """The learnings a `LEARNINGS_DECIDED` verdict holds (a shape not theirs raises)."""
    found = verdict.get("learnings", [])
    if not isinstance(found, list):
        raise TypeError(f"decided learnings are a list, not {type(found).__name__}")
    return [_learning(item) for item in found]


def _learning(item: object) -> DecidedLearning:
    if not isinstance(item, dict) or not isinstance(tags := item["tags"], list):
        raise TypeError(f"a decided learning has content and tags, not {item!r}")
    return DecidedLearning(content=str(item["content"]), tags=[str(t) for t in tags])
