"""A backup's `manifest.json`: what it holds, how it is encrypted, and the hash of each file.

A backup is a directory pfar made: the three vault databases, the `unlock.json` that
goes with them (an encrypted vault's), and this manifest. Retention recognises pfar's
backups by it (`made_by`), and a restore checks every file against it before it
touches a home.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import BackupDamaged
from .driver import sqlite

MANIFEST_NAME = "manifest.json"
MADE_BY = "pfar vault backup"
FORMAT = 1
DB_NAMES = ("sessions.db", "secrets.db", "memory.db")
DB_KINDS = {"sessions.db": "sessions", "secrets.db": "secrets", "memory.db": "memory"}

# "vault-key": the files are encrypted with the vault's own key (unlock.json says where
# it is); "backup-key": with a separate key the owner keeps (`--backup-key-file`);
# "none": a plain vault's backup, plain like it
Encryption = Literal["vault-key", "backup-key", "none"]
_ENCRYPTIONS: tuple[Encryption, ...] = ("vault-key", "backup-key", "none")


@dataclass(frozen=True, slots=True)
class FileEntry:
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Manifest:
    backup_id: str
    pfar_version: str
    made_at: str  # RFC 3339, UTC
    vault_id: str | None  # None: a plain vault
    encryption: Encryption
    # an HMAC of backup_id under the backup key: a wrong key is told from a damaged file
    backup_key_check: str | None
    position: int  # the journal's position: bus_events' high-water mark
    tasks: dict[str, int]  # task counts by state
    schema: dict[str, int]  # database file -> schema version
    files: dict[str, FileEntry] = field(default_factory=dict)
    home: str = ""

    @property
    def task_total(self) -> int:
        return sum(self.tasks.values())

    def made_at_time(self) -> datetime:
        return datetime.fromisoformat(self.made_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "made_by": MADE_BY,
            "backup_id": self.backup_id,
            "pfar_version": self.pfar_version,
            "made_at": self.made_at,
            "home": self.home,
            "vault_id": self.vault_id,
            "encryption": self.encryption,
            "backup_key_check": self.backup_key_check,
            "position": self.position,
            "tasks": dict(sorted(self.tasks.items())),
            "schema": dict(self.schema),
            "files": {
                name: {"sha256": e.sha256, "bytes": e.bytes} for name, e in self.files.items()
            },
        }

    @classmethod
    def parse(cls, data: Any, where: Path) -> Manifest:
        try:
            if data.get("made_by") != MADE_BY:
                raise ValueError("made_by is not pfar's")
            if int(data["format"]) > FORMAT:
                raise ValueError(
                    f"format {data['format']} is newer than this pfar reads ({FORMAT}); "
                    "restore it with a newer pfar"
                )
            encryption = data["encryption"]
            if encryption not in _ENCRYPTIONS:
                raise ValueError(f"encryption {encryption!r} is none of {_ENCRYPTIONS}")
            files = {
                str(name): FileEntry(str(e["sha256"]), int(e["bytes"]))
                for name, e in data["files"].items()
            }
            unknown = [n for n in files if n not in (*DB_NAMES, "unlock.json")]
            if unknown or "sessions.db" not in files:
                raise ValueError(f"files lists {unknown or 'no sessions.db'}")
            manifest = cls(
                backup_id=str(data["backup_id"]),
                pfar_version=str(data["pfar_version"]),
                made_at=str(data["made_at"]),
                vault_id=None if data["vault_id"] is None else str(data["vault_id"]),
                encryption=encryption,
                backup_key_check=(
                    None if data.get("backup_key_check") is None else str(data["backup_key_check"])
                ),
                position=int(data["position"]),
                tasks={str(k): int(v) for k, v in data["tasks"].items()},
                schema={str(k): int(v) for k, v in data["schema"].items()},
                files=files,
                home=str(data.get("home", "")),
            )
            manifest.made_at_time()
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise BackupDamaged(
                f"{where} is not a pfar backup manifest ({exc!s}); nothing was restored"
            ) from None
        return manifest


def read_manifest(backup: Path) -> Manifest:
    path = backup / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BackupDamaged(
            f"{backup} is not a pfar backup: it has no {MANIFEST_NAME} (made by "
            "`pfar vault backup`); nothing was restored"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BackupDamaged(f"{path} cannot be read ({exc}); nothing was restored") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BackupDamaged(f"{path} is not JSON ({exc}); nothing was restored") from None
    return Manifest.parse(data, path)


def is_pfar_backup(directory: Path) -> Manifest | None:
    """The manifest of a directory pfar made as a backup, or None for anything else."""
    try:
        return read_manifest(directory)
    except BackupDamaged:
        return None


@dataclass(frozen=True, slots=True)
class JournalFacts:
    """What a journal says about itself: where it is, how many tasks in which state."""

    position: int
    tasks: dict[str, int]

    @property
    def task_total(self) -> int:
        return sum(self.tasks.values())


def journal_facts(conn: sqlite.Connection) -> JournalFacts:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'bus_events'").fetchone()
    tasks = {
        str(state): int(n)
        for state, n in conn.execute(
            "SELECT state, count(*) FROM task_journal GROUP BY state ORDER BY state"
        ).fetchall()
    }
    return JournalFacts(int(row[0]) if row else 0, tasks)


def describe_tasks(tasks: dict[str, int]) -> str:
    if not tasks:
        return "no tasks"
    return ", ".join(f"{n} {state}" for state, n in sorted(tasks.items()))
