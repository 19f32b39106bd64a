"""The audit log: one JSON line per kernel event, redacted, buffered, flushed on shutdown."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..policy.redact import Redactor


class AuditLog:
    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._path = path
        self._redactor = redactor
        self._buffer: list[str] = []
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the kernel's life
        os.chmod(path, 0o600)

    def log(self, event: str, **fields: Any) -> None:
        record = {"at": datetime.now(UTC).isoformat(), "event": event, **fields}
        line = self._redactor.text(json.dumps(self._redactor.value(record), default=str))
        self._buffer.append(line)
        if len(self._buffer) >= 256:
            self.flush(sync=False)

    def flush(self, *, sync: bool = True) -> None:
        if self._buffer:
            self._fh.write("\n".join(self._buffer) + "\n")
            self._buffer.clear()
        self._fh.flush()
        if sync:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        self.flush()
        self._fh.close()
