"""Keeping `vault/acknowledged` up with the journal while a kernel runs.

The journal writer tells it of each commit: inside the transaction, it reads the
position the commit makes durable; after the COMMIT, before any waiter hears that its
write is durable, it writes the record. What a task, a client or a chat channel was
told had happened is covered by the record, even if the kernel is killed the next
instant.
The record is rewritten only when the journal's position moved (a step's commit
that moves no task leaves it as it was), in place and without fsync
(vault/acknowledged.py says why that is enough).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import PfarError
from ..journal import bus_sql
from ..journal.records import now_rfc3339
from ..journal.sqlite.dialect import SQLITE
from ..journal.tx import Tx
from ..vault import acknowledged
from ..vault.acknowledged import Acknowledged, AcknowledgedFile, AuditMark, Encoder
from ..vault.driver import sqlite

log = logging.getLogger("pfar.kernel")


class Acknowledging:
    """The journal writer's commit watcher (journal/writer.py CommitWatcher)."""

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
        self._seen = position  # read inside the transaction being committed
        self._cursor: sqlite.Cursor | None = None
        self._appended = bus_sql.APPENDED[0]  # bus events appended at the last read
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

    @property
    def position(self) -> int:
        return self._position

    def inside(self, conn: Tx) -> None:
        appended = bus_sql.APPENDED[0]
        if appended == self._appended:
            return  # no event was appended since the last read: the mark did not move
        self._appended = appended
        try:
            assert isinstance(conn, sqlite.Connection)  # kept for a SQLite journal only
            if self._cursor is None or self._cursor.connection is not conn:
                # a plain cursor of its own, kept: the vault connection's translating
                # cursor, made anew for each statement, cost five times the read itself
                self._cursor = sqlite.Cursor(conn)
            row = self._cursor.execute(SQLITE.bus_high_water).fetchone()
            self._seen = 0 if row is None else int(row[0])
        except (sqlite.Error, PfarError) as exc:  # the commit goes on; the record lags
            self._failing(exc)

    def committed(self) -> None:
        self._commits += 1
        if self._seen == self._position:
            return  # a commit that moved no task (a step's): the record stands
        self._position = self._seen
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

    def _failing(self, exc: BaseException) -> None:
        if not self._failed:
            log.error(
                "%s: cannot be kept up (%s); a journal that goes back in time may not be "
                "noticed at the next start",
                self._file.path,
                exc,
            )
        self._failed = True
