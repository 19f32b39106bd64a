"""`vault/acknowledged`: how far the journal had come when the kernel last acknowledged
work, kept outside the journal it vouches for.

A journal that comes back shorter than this record lost acknowledged work: its
write-ahead log was deleted, or an older copy of the vault was put in its place.
SQLite cannot tell; this record can, because it does not go back with the database.

The record is one small JSON object, padded with spaces to `SIZE` bytes and rewritten
in place (`pwrite` at offset 0, one sector) after each journal commit that moved the
journal's position. It is not fsynced then: a killed process's writes stay in the
page cache, and the commit it follows was fsynced first (`synchronous=FULL`), so the
record is never ahead of what is durable; after a power cut it may be behind, which
only makes it vouch for less. It is fsynced when made and when the kernel stops.

The journal's position is the event bus's high-water mark (`sqlite_sequence` of
`bus_events`): every task's creation and move appends an event in its own
transaction, and the mark outlives the pruning of old events.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = "acknowledged"
SIZE = 512  # one sector: a rewrite in place is never seen half done after a crash
VERSION = 1


@dataclass(frozen=True, slots=True)
class AuditMark:
    """The audit log's hash chain head when the record was written: how many records
    the chain had, and the digest of the last one."""

    count: int
    digest: str


@dataclass(frozen=True, slots=True)
class Acknowledged:
    position: int  # the journal's bus high-water mark
    commits: int  # journal commits made under this record, across kernel starts
    at: str  # when it was written (UTC)
    boot_id: str  # the kernel boot that wrote it
    machine_boot: str  # the machine's boot id then (/proc/sys/kernel/random/boot_id)
    synchronous: str  # "FULL" or "NORMAL": whether a commit was fsynced before the record
    audit: AuditMark | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "position": self.position,
            "commits": self.commits,
            "at": self.at,
            "boot_id": self.boot_id,
            "machine_boot": self.machine_boot,
            "synchronous": self.synchronous,
            "audit": None
            if self.audit is None
            else {"count": self.audit.count, "digest": self.audit.digest},
        }

    @classmethod
    def from_json(cls, value: object) -> Acknowledged:
        """The record `value` holds; ValueError names what is wrong with it."""
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        position, commits = value.get("position"), value.get("commits", 0)
        if not isinstance(position, int) or isinstance(position, bool) or position < 0:
            raise ValueError(f"position: {position!r} is not a whole number")
        if not isinstance(commits, int) or isinstance(commits, bool) or commits < 0:
            raise ValueError(f"commits: {commits!r} is not a whole number")
        audit = value.get("audit")
        mark = None
        if isinstance(audit, dict):
            count, digest = audit.get("count"), audit.get("digest")
            if not isinstance(count, int) or not isinstance(digest, str):
                raise ValueError(f"audit: {audit!r} is not a count and a digest")
            mark = AuditMark(count, digest)
        return cls(
            position,
            commits,
            str(value.get("at", "")),
            str(value.get("boot_id", "")),
            str(value.get("machine_boot", "")),
            str(value.get("synchronous", "FULL")),
            mark,
        )


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record that is there but cannot be read: pfar cannot tell what was acknowledged."""

    path: Path
    reason: str


def path_of(vault_dir: Path) -> Path:
    return vault_dir / NAME


def read(vault_dir: Path) -> Acknowledged | Unreadable | None:
    """The record, or None when there is none (a new home, or an older pfar's)."""
    path = path_of(vault_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Unreadable(path, exc.strerror or str(exc))
    try:
        return Acknowledged.from_json(json.loads(raw.decode()))
    except (UnicodeDecodeError, ValueError) as exc:
        return Unreadable(path, str(exc))


def encode(record: Acknowledged) -> bytes:
    return Encoder(record.boot_id, record.machine_boot, record.synchronous)(
        record.position, record.commits, record.at, record.audit
    )


class Encoder:
    """The record's bytes, for one kernel boot: its boot, machine and synchronous mode
    are encoded once; what moves from one write to the next is formatted into them
    (json.dumps of the whole record on every commit cost more than the rest of it)."""

    def __init__(self, boot_id: str, machine_boot: str, synchronous: str) -> None:
        self._fixed = (
            f',"boot_id":{json.dumps(boot_id)},"machine_boot":{json.dumps(machine_boot)}'
            f',"synchronous":{json.dumps(synchronous)},"audit":'
        )

    def __call__(self, position: int, commits: int, at: str, audit: AuditMark | None) -> bytes:
        moving = (
            f'{{"version":{VERSION},"position":{position:d},"commits":{commits:d},'
            f'"at":{json.dumps(at)}'
        )
        mark = "null" if audit is None else _audit_json(audit)
        text = f"{moving}{self._fixed}{mark}}}"
        data = text.encode()
        if len(data) >= SIZE:
            raise ValueError(f"the acknowledged record is {len(data)} bytes, over {SIZE - 1}")
        return data.ljust(SIZE - 1) + b"\n"


def _audit_json(audit: AuditMark) -> str:
    return f'{{"count":{audit.count:d},"digest":{json.dumps(audit.digest)}}}'


def machine_boot() -> str:
    """This machine's boot id: a record written before a reboot has another one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class AcknowledgedFile:
    """The record, open for rewriting in place. Made (or replaced) whole and fsynced
    when opened: a fresh record is never half there after a crash."""

    def __init__(self, vault_dir: Path, record: Acknowledged) -> None:
        self.path = path_of(vault_dir)
        replace(vault_dir, record)
        self._fd: int | None = os.open(self.path, os.O_WRONLY)

    def write(self, data: bytes) -> None:
        """Rewrite the record in place with `data` (an Encoder's), without fsync (see
        the module's docstring)."""
        if self._fd is not None:
            os.pwrite(self._fd, data, 0)

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None


def replace(vault_dir: Path, record: Acknowledged) -> None:
    """Write `record` whole as a new file and put it in place, fsynced with its
    directory: after a crash the old record or the new one is there, never neither."""
    path = path_of(vault_dir)
    tmp = path.with_name(f".{NAME}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, encode(record))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(vault_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
