"""Keeping `vault/acknowledged` up with the journal while a kernel runs.

The journal writer calls `after_commit` after each commit, before any waiter hears
that its write is durable: what a task, a client or a chat channel was told had
happened is covered by the record, even if the kernel is killed the next instant.
The record is rewritten only when the journal's position moved (a step's commit
that moves no task leaves it as it was), in place and without fsync
(vault/acknowledged.py says why that is enough).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..journal import bus_sql
from ..vault import acknowledged
from ..vault.acknowledged import Acknowledged, AcknowledgedFile, AuditMark
from ..vault.driver import sqlite

log = logging.getLogger("pfar.kernel")


class Acknowledging:
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
        self._record = Acknowledged(
            position,
            self._commits,
            _now(),
            boot_id,
            acknowledged.machine_boot(),
            synchronous,
            self._audit(),
        )
        self._failed = False
        self._file = AcknowledgedFile(vault_dir, self._record)

    @property
    def position(self) -> int:
        return self._position

    def after_commit(self, conn: sqlite.Connection) -> None:
        """The writer's hook: never raises (the commit it follows is done, and the
        record is a check on the journal, not part of it)."""
        self._commits += 1
        try:
            position = bus_sql.high_water(conn)
            if position == self._position:
                return
            self._position = position
            self._write()
        except (OSError, sqlite.Error, ValueError) as exc:
            self._failing(exc)

    def _write(self) -> None:
        self._record = dataclasses.replace(
            self._record,
            position=self._position,
            commits=self._commits,
            at=_now(),
            audit=self._audit(),
        )
        self._file.write(self._record)

    def close(self) -> None:
        """At a shutdown, after the journal's last commit and the audit log's flush: the
        record as the kernel leaves it, fsynced."""
        try:
            self._write()
        except (OSError, ValueError) as exc:
            self._failing(exc)
        self._file.close()

    def abandon(self) -> None:
        """A start that failed, or a fail-stop: the record stays as the last commit left it."""
        self._file.close()

    def _audit(self) -> AuditMark | None:
        if self._head is None:
            return None
        head = self._head()
        return None if head is None else AuditMark(int(head.count), str(head.digest))

    def _failing(self, exc: BaseException) -> None:
        if not self._failed:
            log.error(
                "%s: cannot be written (%s); a journal that goes back in time may not be "
                "noticed at the next start",
                self._file.path,
                exc,
            )
        self._failed = True


def _now() -> str:
    return datetime.now(UTC).isoformat()
