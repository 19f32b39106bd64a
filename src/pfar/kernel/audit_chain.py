"""The audit log's chain: what a record line is, how it names the line before it, and how
the end of the file is read without reading the file.

A record is one line of JSON (ASCII: `json.dumps` escapes the rest) and a newline:

    {"n": 57, "prev": "9f2c…", "at": "2025-…", "event": "task_created", "task_id": "…"}

`n` numbers the file's records from 1. `prev` is the SHA-256, in hex, of the bytes of the
line before it (without its newline); record 1 has GENESIS there instead. So a record
edited, removed, inserted or moved breaks the chain where it was, and the last record's
number and digest (the head) stand for everything before them: a checkpoint of the head
kept elsewhere finds a tail cut off, which nothing inside the file can.

A line that is not a record (a write a crash cut off, or lines an older pfar wrote before
the log was chained) is bridged, not rewritten: the next start appends a record whose
`prev` is that line's digest and whose `after` is the digest of the last record before it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

GENESIS: Final = "0" * 64
"""What record 1 of a file chains to: no line comes before it."""

TORN_TAIL: Final = "audit_torn_tail"
"""The record a start writes after a last line that is not a whole record."""
CHAIN_STARTED: Final = "audit_chain_started"
"""The record a start writes after lines an older pfar wrote, before the log was chained."""
BRIDGES: Final = frozenset({TORN_TAIL, CHAIN_STARTED})

CHAIN_KEYS: Final = frozenset({"n", "prev"})

# how far before a line that is not a record the tail is searched for the last record:
# past it (megabytes of lines that are not records) the bridge starts the numbers again,
# and `pfar audit verify` reports the bridge (nothing is lost: the lines stay)
_LOOK_BACK: Final = 1 << 20
_BLOCK: Final = 1 << 16
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class AuditHead:
    """The last record of a log: its number (how many records the chain holds) and the
    digest of its line. `AuditHead(0, GENESIS)` is an empty log's."""

    count: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "digest": self.digest}


EMPTY: Final = AuditHead(0, GENESIS)


@dataclass(frozen=True, slots=True)
class Record:
    """A line that is a chain record."""

    n: int
    prev: str
    event: str
    data: dict[str, Any]

    @property
    def after(self) -> str | None:
        """A bridge's digest of the last record before the lines it bridges."""
        after = self.data.get("after")
        return after if isinstance(after, str) else None


@dataclass(frozen=True, slots=True)
class Unchained:
    """A JSON object without the chain's fields: what pfar wrote before it chained its
    audit log."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Garbled:
    """Anything else: not a JSON object (a write cut off part way, or damage)."""


Line = Record | Unchained | Garbled


def line_digest(line: bytes) -> str:
    """The digest the next record's `prev` holds: SHA-256 of the line without its newline."""
    return hashlib.sha256(line).hexdigest()


def parse_line(line: bytes) -> Line:
    try:
        data = json.loads(line)
    except ValueError:  # UnicodeDecodeError is one
        return Garbled()
    if not isinstance(data, dict):
        return Garbled()
    n, prev, event = data.get("n"), data.get("prev"), data.get("event")
    if (
        isinstance(n, int)
        and not isinstance(n, bool)
        and n >= 1
        and isinstance(prev, str)
        and _HEX64.fullmatch(prev)
        and isinstance(event, str)
    ):
        return Record(n, prev, event, data)
    if "n" in data or "prev" in data:  # chain fields of the wrong shape: not from before
        return Garbled()
    return Unchained(data)


def chain_line(count: int, prev: str, body: str) -> bytes:
    """Record `count`'s line (no newline): `body` is the rest of the record as a JSON
    object, already redacted; the chain's fields go first and never pass the redactor."""
    return f'{{"n": {count}, "prev": "{prev}", {body[1:]}'.encode()


@dataclass(frozen=True, slots=True)
class Tail:
    """The end of an audit log, as a start finds it."""

    head: AuditHead
    """The last whole record (EMPTY when there is none)."""
    last: bytes | None
    """The last line when it is not a whole record ending in a newline: it needs a bridge.
    None when the log ends well (or is empty)."""
    newline: bool
    """Whether the file ends with a newline (an empty file does)."""

    @property
    def bridge(self) -> str:
        """The event that bridges `last`: lines from before the chain, or a torn tail."""
        assert self.last is not None
        from_before = isinstance(parse_line(self.last), Unchained)
        return CHAIN_STARTED if self.head == EMPTY and from_before and self.newline else TORN_TAIL


def read_tail(fd: int) -> Tail:
    """The end of the file open on `fd` (which can be read), read from the end: the last
    line, and, when it is not a record, back to the last record before it."""
    size = os.fstat(fd).st_size
    if size == 0:
        return Tail(EMPTY, None, newline=True)
    newline = os.pread(fd, 1, size - 1) == b"\n"
    lines = _lines_backwards(fd, size - 1 if newline else size)
    last = next(lines)
    parsed = parse_line(last)
    if newline and isinstance(parsed, Record):
        return Tail(AuditHead(parsed.n, line_digest(last)), None, newline=True)
    looked = 0
    for line in chain([last], lines):
        found = parse_line(line)
        if isinstance(found, Record):
            return Tail(AuditHead(found.n, line_digest(line)), last, newline)
        looked += len(line) + 1
        if looked > _LOOK_BACK:
            break
    return Tail(EMPTY, last, newline)


def _lines_backwards(fd: int, end: int) -> Iterator[bytes]:
    """The lines of the file's first `end` bytes, the last one first, without newlines."""
    pos = end
    pending: list[bytes] = []  # what was read of the current line, its end first
    while pos > 0:
        start = max(0, pos - _BLOCK)
        chunk = os.pread(fd, pos - start, start)
        pos = start
        hi = len(chunk)
        cut = chunk.rfind(b"\n", 0, hi)
        while cut >= 0:
            pending.append(chunk[cut + 1 : hi])
            yield b"".join(reversed(pending))
            pending = []
            hi = cut
            cut = chunk.rfind(b"\n", 0, hi)
        pending.append(chunk[:hi])
    yield b"".join(reversed(pending))
