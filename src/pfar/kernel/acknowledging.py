"""Keeping `vault/acknowledged` up with the journal while a kernel runs.

The journal writer tells it of each commit (journal/sqlite/marks.py BusMarkWatcher
reads, inside the transaction, the position the commit makes durable): after the
COMMIT, before any waiter hears that its write is durable, it writes the record. What
a task, a client or a chat channel was told had happened is covered by the record,
even if the kernel is killed the next instant.
The record is rewritten only when the journal's position moved (a step's commit
that moves no task leaves it as it was), in place and without fsync
(vault/acknowledged.py says why that is enough).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..journal.records import now_rfc3339
from ..journal.sqlite.marks import BusMarkWatcher
from ..vault import acknowledged
from ..vault.acknowledged import Acknowledged, AcknowledgedFile, AuditMark, Encoder

log = logging.getLogger("pfar.kernel")


class Acknowledging:
    """Told of each commit of the journal, with its position (`watcher` is what the
    journal's writer calls)."""

    def __init__(
        self,
        vault_dir: Path,
        position: int,
        *,
        previous: Acknowledged | None,
        boot_id: str,
        synchronous: str,
        audit_head: Callable[[], Any] | None = None,
    ) -> None:
        # the audit log's hash chain head (AuditLog.head() -> AuditHead(count, digest)),
        # where the audit log keeps one
        self._head = audit_head
        self._position = position
        self._commits = previous.commits if previous is not None else 0
        record = Acknowledged(
            position,
            self._commits,
            now_rfc3339(),
            boot_id,
            acknowledged.machine_boot(),
            synchronous,
            self._audit(),
        )
        self._encode = Encoder(record.boot_id, record.machine_boot, record.synchronous)
        self._failed = False
        self._file = AcknowledgedFile(vault_dir, record)
        self.watcher = BusMarkWatcher(self, position)

    @property
    def position(self) -> int:
        return self._position

    def unreadable(self, why: str) -> None:
        self._failing(why)  # the commit goes on; the record lags

    def committed(self, position: int) -> None:
        self._commits += 1
        if position == self._position:
            return  # a commit that moved no task (a step's): the record stands
        self._position = position
        self._write()

    def _write(self) -> None:
        try:
            self._file.write(
                self._encode(self._position, self._commits, now_rfc3339(), self._audit())
            )
        except (OSError, ValueError) as exc:
            self._failing(exc)

    def close(self) -> None:
        """At a shutdown, after the journal's last commit and the audit log's flush: the
        record as the kernel leaves it, fsynced."""
        self._write()
        self._file.close()

    def abandon(self) -> None:
        """A fail-stop: the record stays as the last commit left it."""
        self._file.close()

    def _audit(self) -> AuditMark | None:
        if self._head is None:
            return None
        try:
            head = self._head()
        except Exception as exc:  # the audit log's own trouble: the record goes on without
            self._failing(exc)
            return None
        return None if head is None else AuditMark(int(head.count), str(head.digest))

    def _failing(self, exc: BaseException | str) -> None:
        if not self._failed:
            log.error(
                "%s: cannot be kept up (%s); a journal that goes back in time may not be "
                "noticed at the next start",
                self._file.path,
                exc,
            )
        self._failed = True
