"""The audit log: one JSON line per kernel event, redacted, hash-chained, in the file as
soon as it is logged.

The audit log records what the kernel did; it is not what the kernel's work rests on (the
journal is). Each record is handed to the OS as it is logged (one `write`, no fsync: a
SIGKILL loses none; `flush` and `close` fsync), and carries the number and the digest of
the line before it (kernel/audit_chain.py), so `pfar audit verify` finds a record edited,
removed, inserted or moved, and `head()` is what a checkpoint kept elsewhere compares.

A write that fails (a full disk, a file that went away) is reported once and the records
wait in memory for the next flush; the kernel never stops for it. Records wait unchained:
numbers and digests are given as lines reach the file, so records that had to be dropped
leave no hole in the chain but an `audit_records_lost` record saying how many.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import PfarError
from ..policy.redact import Redactor
from .audit_chain import (
    CHAIN_KEYS,
    CHAIN_STARTED,
    AuditHead,
    Tail,
    chain_line,
    line_digest,
    read_tail,
)

__all__ = ["AuditHead", "AuditLog"]

log = logging.getLogger("pfar.audit")

# what every record has: an event's field of one of these names is kept as NAME_field
_OWN_KEYS = CHAIN_KEYS | {"at"}
_KEEP_AT_MOST = 100_000  # records held while the file cannot be written; the oldest go first


class AuditLog:
    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._path = path
        self._redactor = redactor
        # redacted records, not yet numbered: numbered as they go to the file
        self._waiting: deque[str] = deque(maxlen=_KEEP_AT_MOST)
        self._unsent = b""  # numbered lines whose write failed or stopped part way
        self._unsent_head: AuditHead | None = None  # the chain once they are written
        self._unsent_records = 0  # how many logged records `_unsent` holds
        self._dropped = 0  # records that fell out of `_waiting`, not yet said in the file
        self._lost = 0  # records said lost (in `audit_records_lost`)
        self._failing = False
        # channels' libraries may log from a thread of their own: one line at a time
        self._lock = threading.Lock()
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise PfarError(f"{path}: cannot open the audit log ({exc.strerror})") from None
        try:
            os.fchmod(fd, 0o600)
            tail = read_tail(fd)
        except OSError as exc:
            os.close(fd)
            raise PfarError(f"{path}: cannot read the audit log's end ({exc.strerror})") from None
        self._fd: int | None = fd
        self._head = tail.head  # the chain as far as lines were numbered
        self._written = tail.head  # as far as lines reached the file
        self._synced = tail.head  # as far as an fsync made them durable
        if tail.last is not None:
            self._bridge(tail)

    def log(self, event: str, **fields: Any) -> None:
        if not _OWN_KEYS.isdisjoint(fields):  # a field never passes for the record's own
            fields = {(f"{k}_field" if k in _OWN_KEYS else k): v for k, v in fields.items()}
        record = {"at": datetime.now(UTC).isoformat(), "event": event, **fields}
        body = self._redactor.text(json.dumps(self._redactor.value(record), default=str))
        with self._lock:
            if len(self._waiting) == _KEEP_AT_MOST:  # the oldest falls out as this one goes in
                self._dropped += 1
            self._waiting.append(body)
            if not self._failing:  # a failing file is tried again by flush, once a second
                self._flush(sync=False)

    def head(self) -> AuditHead:
        """The last record in the file (handed to the OS, maybe not on disk yet): its
        number and its line's digest. A checkpoint that must survive a power cut takes
        `synced_head()` instead, or calls `flush()` first."""
        return self._written

    def synced_head(self) -> AuditHead:
        """The last record an fsync made durable."""
        return self._synced

    def flush(self, *, sync: bool = True) -> None:
        """Write what waits, then fsync (unless `sync` is False); never raises."""
        with self._lock:
            self._flush(sync=sync)

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            self._flush(sync=True)
            unsent = min(self._unsent_records, self._unsent.count(b"\n"))
            lost = len(self._waiting) + unsent + self._dropped + self._lost
            if lost:
                log.error("%d audit record(s) could not be written and are lost", lost)
            os.close(self._fd)
            self._fd = None

    def _bridge(self, tail: Tail) -> None:
        """The last line is not a whole record: it stays as it is, and the first record of
        this start says so and chains over its bytes (see audit_chain)."""
        assert tail.last is not None
        record = {
            "at": datetime.now(UTC).isoformat(),
            "event": tail.bridge,
            "after": tail.head.digest,
            "bytes": len(tail.last),
            "newline": tail.newline,
        }
        count = tail.head.count + 1
        line = chain_line(count, line_digest(tail.last), json.dumps(record))
        self._head = AuditHead(count, line_digest(line))
        # a line cut off before its newline is ended first, so nothing is appended to it
        self._unsent = (b"" if tail.newline else b"\n") + line + b"\n"
        self._unsent_head = self._head
        if tail.bridge == CHAIN_STARTED:
            log.info(
                "%s: chained from here on (its lines before are from an older pfar)", self._path
            )
        else:
            log.warning(
                "%s: its last line (%d bytes, %s) is not a whole audit record: a write cut off "
                "by a crash; kept as it is, and recorded as %s",
                self._path,
                len(tail.last),
                "ending in a newline" if tail.newline else "no newline",
                tail.bridge,
            )
        self._flush(sync=False)

    def _flush(self, *, sync: bool) -> None:
        if self._fd is None:
            return
        try:
            self._write_out()
            if sync:
                os.fsync(self._fd)
                self._synced = self._written
        except OSError as exc:
            if not self._failing:
                log.error(
                    "%s: cannot be written (%s); audit records wait in memory until it can",
                    self._path,
                    exc.strerror or exc,
                )
            self._failing = True
            return
        if self._failing:
            log.warning("%s: written again", self._path)
        self._failing = False

    def _write_out(self) -> None:
        # what a failed write left is written first, so lines never interleave or repeat
        assert self._fd is not None
        while True:
            while self._unsent:
                self._unsent = self._unsent[os.write(self._fd, self._unsent) :]
            if self._unsent_head is not None:
                self._written, self._unsent_head = self._unsent_head, None
            self._unsent_records = 0
            if self._dropped:  # said before the records that waited after them
                self._unsent = self._number(self._lost_notice())
            elif self._waiting:
                self._unsent = b"".join(self._number(body) for body in self._waiting)
                self._unsent_records = len(self._waiting)
                self._waiting.clear()
            else:
                return
            self._unsent_head = self._head

    def _number(self, body: str) -> bytes:
        line = chain_line(self._head.count + 1, self._head.digest, body)
        self._head = AuditHead(self._head.count + 1, line_digest(line))
        return line + b"\n"

    def _lost_notice(self) -> str:
        count, self._dropped = self._dropped, 0
        self._lost += count
        return json.dumps(
            {
                "at": datetime.now(UTC).isoformat(),
                "event": "audit_records_lost",
                "count": count,
                "why": "the audit log could not be written while they waited",
            }
        )
