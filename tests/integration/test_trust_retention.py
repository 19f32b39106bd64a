"""A kernel's journal cleanup (at start, then every `cleanup_interval_hours`) also
prunes what used to grow for ever: model calls of tasks that are gone, chat deliveries
that ended past the retention, and kernel boots beyond the last hundred."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pfar.journal.records import rfc3339

from ..support import db, make_home, running_kernel


def test_a_start_prunes_old_history_and_keeps_what_is_live(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script='[[turns]]\ntext = "ok"\n')
    old = datetime.now(UTC) - timedelta(days=30)
    recent = rfc3339(datetime.now(UTC) - timedelta(minutes=5))
    with contextlib.closing(db(home)) as conn:
        conn.executemany(
            "INSERT INTO kernel_boots(boot_id, pid, version, started_at, ended_at, clean) "
            "VALUES (?, 1, '0', ?, ?, 1)",
            [(f"old-{n}", rfc3339(old + timedelta(minutes=n)), rfc3339(old)) for n in range(250)],
        )
        conn.executemany(
            "INSERT INTO llm_calls(task_id, provider, model, input_tokens, output_tokens, "
            "total_time, cost_usd, queued_seconds, at) VALUES (?, 's', 'm', 1, 1, 0, 0, 0, ?)",
            [("a-deleted-task", rfc3339(old))] * 700,
        )
        conn.executemany(
            "INSERT INTO channel_outbox(channel, message_key, seq, status, updated_at) "
            "VALUES ('chat', ?, ?, ?, ?)",
            [(f"sent-{n}", n, "sent", rfc3339(old)) for n in range(600)]
            + [
                ("recent-sent", 1000, "sent", recent),
                ("old-pending", 1001, "pending", rfc3339(old)),
                ("old-doubt", 1002, "in_doubt", rfc3339(old)),
            ],
        )
    with running_kernel(home):
        pass
    with contextlib.closing(db(home)) as conn:
        boots = conn.execute("SELECT count(*) FROM kernel_boots").fetchone()[0]
        calls = conn.execute(
            "SELECT count(*) FROM llm_calls WHERE task_id = 'a-deleted-task'"
        ).fetchone()[0]
        left = {r[0] for r in conn.execute("SELECT message_key FROM channel_outbox")}
        newest = conn.execute(
            "SELECT boot_id FROM kernel_boots ORDER BY started_at DESC LIMIT 1"
        ).fetchone()[0]
    assert boots == 100
    assert not newest.startswith("old-")  # the boot that just ran is kept
    assert calls == 0
    assert left == {"recent-sent", "old-pending", "old-doubt"}
