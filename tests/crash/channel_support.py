"""What the chat channel crash tests read from a killed kernel's journal."""

from __future__ import annotations

import json

from pfar.vault.home import Home

from .test_regressions import rows


def settled(home: Home) -> bool:
    """No delivery waits or is on its way (each is sent, in doubt or failed)."""
    found = {r["status"] for r in rows(home, "SELECT status FROM channel_outbox")}
    return bool(found) and found <= {"sent", "in_doubt", "failed"}


def prompts(home: Home) -> list[str]:
    """Each task's prompt, in the order the tasks were created."""
    found = rows(home, "SELECT trigger_event FROM task_journal ORDER BY created_at")
    return [json.loads(r["trigger_event"])["text"] for r in found]
