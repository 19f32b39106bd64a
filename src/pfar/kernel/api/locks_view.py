"""The resource locks tool calls hold, as the owner is shown them (`pfar locks`, the
console's Kernel page): what is locked and how, by which task, on which host and
process, and until when its lease runs (a holder that stops renewing it loses it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...journal.locks_sql import HeldLock


@dataclass(frozen=True, slots=True)
class LockView:
    kind: str  # what is locked: a file, a repository, a named resource
    name: str
    mode: str  # exclusive or shared
    task_id: str
    host: str
    pid: int
    acquired_at: str
    lease_until: str

    @classmethod
    def of(cls, held: HeldLock) -> LockView:
        return cls(
            kind=held.kind,
            name=held.name,
            mode=held.mode,
            task_id=held.task_id,
            host=held.host,
            pid=held.pid,
            acquired_at=held.acquired_at,
            lease_until=held.lease_until,
        )
