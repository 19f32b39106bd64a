"""What the chat channel crash tests read from a killed kernel's journal (through the
store's verbs: they run on either backend)."""

from __future__ import annotations

from pfar.journal.store import Store
from pfar.vault.home import Home

from ..support import read_journal, tasks_in_order

# the chat channels a test home may have enabled (each test enables one)
CHANNELS = ("telegram", "slack", "whatsapp")


def delivery_counts(home: Home) -> dict[str, int]:
    """How many deliveries are in each status, over every chat channel."""

    async def read(s: Store) -> dict[str, int]:
        total: dict[str, int] = {}
        for channel in CHANNELS:
            for status, n in (await s.adapters.delivery_counts(channel)).items():
                total[status] = total.get(status, 0) + n
        return total

    return read_journal(home, read)


def settled(home: Home) -> bool:
    """No delivery waits or is on its way (each is sent, in doubt or failed)."""
    found = {status for status, n in delivery_counts(home).items() if n}
    return bool(found) and found <= {"sent", "in_doubt", "failed"}


def sent_remote_ids(home: Home, channel: str) -> list[str]:
    """The ids the channel gave the deliveries it took, sorted."""
    found = read_journal(home, lambda s: s.adapters.sent_ids(channel, ""))
    return sorted(remote_id for _, remote_id in found)


def prompts(home: Home) -> list[str]:
    """Each task's prompt, in the order the tasks were created."""
    return [str((t.trigger_event or {})["text"]) for t in tasks_in_order(home)]
