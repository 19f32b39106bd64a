"""The audit log: one JSON line per kernel event, redacted, buffered, flushed on shutdown.

The audit log records what the kernel did; it is not what the kernel's work rests on (the
journal is). A write that fails (a full disk, a file that went away) is reported once and
the records wait in memory for the next flush; the kernel never stops for it.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import PfarError
from ..policy.redact import Redactor

log = logging.getLogger("pfar.audit")

_FLUSH_AT = 256
_KEEP_AT_MOST = 100_000  # records held while the file cannot be written; the oldest go first


class AuditLog:
    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._path = path
        self._redactor = redactor
        self._buffer: deque[str] = deque(maxlen=_KEEP_AT_MOST)
        self._unsent = b""  # the rest of a batch whose write stopped part way
        self._dropped = 0
        self._failing = False
        try:
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.fchmod(self._fd, 0o600)
        except OSError as exc:
            raise PfarError(f"{path}: cannot open the audit log ({exc.strerror})") from None

    def log(self, event: str, **fields: Any) -> None:
        record = {"at": datetime.now(UTC).isoformat(), "event": event, **fields}
        line = self._redactor.text(json.dumps(self._redactor.value(record), default=str))
        if len(self._buffer) == _KEEP_AT_MOST:  # the oldest falls out as this one goes in
            self._dropped += 1
        self._buffer.append(line)
        if len(self._buffer) >= _FLUSH_AT and not self._failing:
            self.flush(sync=False)

    def flush(self, *, sync: bool = True) -> None:
        """Write what is buffered; never raises."""
        if self._fd is None:
            return
        try:
            self._write_out()
            if sync:
                os.fsync(self._fd)
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
            if not self._buffer:
                return
            self._unsent = ("\n".join(self._buffer) + "\n").encode()
            self._buffer.clear()

    def close(self) -> None:
        if self._fd is None:
            return
        self.flush()
        lost = len(self._buffer) + self._unsent.count(b"\n") + self._dropped
        if lost:
            log.error("%d audit record(s) could not be written and are lost", lost)
        os.close(self._fd)
        self._fd = None
