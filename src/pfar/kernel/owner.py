"""The owner channel: delivers the journal's outbox to the owner's sinks, each message once.

A message is in the outbox (committed) before any sink sees it; it is marked
delivered after. The owner log keeps the keys it wrote, so a crash between the
write and the mark does not write a message twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ..errors import VaultError
from ..journal import OwnerMessage
from ..journal.message_keys import MessageKey
from ..journal.store import Store
from ..vault.writable import unwritable_file

log = logging.getLogger("pfar.owner")


class Sink(Protocol):
    name: str

    async def deliver(self, message: OwnerMessage) -> None: ...


class OwnerLogSink:
    """`$PFAR_HOME/owner.log`: every message to the owner, one JSON line, fsynced."""

    name = "owner.log"

    def __init__(self, path: Path, remember: int = 4096) -> None:
        self._path = path
        self._recent: deque[str] = deque(maxlen=remember)
        self._known: set[str] = set()
        self._appending = asyncio.Lock()
        if path.exists():
            for line in _tail_lines(path, remember):
                try:
                    self._remember(json.loads(line)["key"])
                except (ValueError, KeyError, TypeError):
                    continue

    def _remember(self, key: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._known.discard(self._recent[0])
        self._recent.append(key)
        self._known.add(key)

    def has(self, key: str) -> bool:
        return key in self._known

    async def deliver(self, message: OwnerMessage) -> None:
        await self.deliver_many([message])

    async def deliver_many(self, messages: list[OwnerMessage]) -> None:
        """Append the messages not logged yet, with one fsync for all of them. The write
        and its fsync run on a thread, so the kernel's tasks go on meanwhile; one append
        at a time, so a message is never logged twice."""
        async with self._appending:
            fresh = [m for m in messages if m.message_key.text not in self._known]
            if fresh:
                await asyncio.to_thread(self._append, _lines(fresh))
                for m in fresh:
                    self._remember(m.message_key.text)

    def _append(self, lines: str) -> None:
        """Raises VaultIOError naming the file when the disk refuses (full, read-only, an
        I/O error): the kernel stops (fail-stop); the messages wait in the outbox."""
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                data = lines.encode()
                # a line a failed write cut short is ended first: the next one stays whole
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise unwritable_file(self._path, exc) from None


def _lines(messages: list[OwnerMessage]) -> str:
    at = datetime.now(UTC).isoformat()
    return "".join(
        json.dumps(
            {
                "at": at,
                "key": m.message_key.text,
                "kind": m.kind.value,
                "task_id": m.task_id,
                "body": m.body,
            }
        )
        + "\n"
        for m in messages
    )


def _tail_lines(path: Path, n: int) -> list[str]:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 256 * n))
        data = fh.read().decode(errors="replace")
    return data.splitlines()[-n:]


class OwnerChannel:
    def __init__(self, journal: Store, owner_log: OwnerLogSink) -> None:
        self._journal = journal
        self._log = owner_log
        self._sinks: list[Sink] = []
        self._wake = asyncio.Event()
        self._handed: set[MessageKey] = set()
        # one delivery at a time: two at once (the channel's own, a shutdown's) would both
        # read the same pending messages and hand each to the sinks twice
        self._delivering = asyncio.Lock()

    def add_sink(self, sink: Sink) -> None:
        self._sinks.append(sink)

    @property
    def log(self) -> OwnerLogSink:
        return self._log

    def notify(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.deliver_pending()

    async def deliver_pending(self) -> int:
        async with self._delivering:
            return await self._deliver_pending()

    async def _deliver_pending(self) -> int:
        # Marking delivered rides on a later commit, so a message may still read as
        # pending for a moment after it went out: `_handed` remembers it meanwhile.
        messages = [
            m for m in await self._journal.events.pending() if m.message_key not in self._handed
        ]
        if not messages:
            return 0
        fresh = [m for m in messages if not self._log.has(m.message_key.text)]
        await self._log.deliver_many(fresh)
        for msg in fresh:
            for sink in self._sinks:
                try:
                    await sink.deliver(msg)
                except VaultError:
                    raise
                except Exception:
                    log.exception("sink %s could not deliver %s", sink.name, msg.message_key)
        keys = [m.message_key for m in messages]
        if len(self._handed) > 100_000:
            self._handed.clear()
        self._handed.update(keys)
        self._journal.events.mark_delivered(keys)
        return len(keys)
