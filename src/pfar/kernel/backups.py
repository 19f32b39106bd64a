"""Scheduled backups (`[vault.backup]`): the running kernel backs its vault up every
`every_hours` into a new directory under `dir`, and keeps the newest `keep` there.

The backup is `pfar vault backup`'s own code, run in a thread: it reads the vault on
read-only connections of its own (WAL: the kernel's writer goes on meanwhile), so the
event loop never waits for it. Each backup and each failure goes to the audit log; a
failure is told to the owner once, and again only after a backup succeeded in between.

Retention removes only directories pfar made as backups of this vault (their manifest
names its vault and home) and holding nothing but a backup's files: a directory the
owner put there, or added a file to, is never removed.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from ..config import VaultBackupConfig
from ..journal.message_keys import BackupFailedKey, MessageKind
from ..journal.records import OwnerMessage
from ..journal.store import Store
from ..vault import keys
from ..vault.backup import BackupKey, make_backup
from ..vault.home import Home
from ..vault.key_place import read_key_file
from ..vault.manifest import DB_NAMES, MANIFEST_NAME, Manifest, is_pfar_backup
from .audit import AuditLog
from .owner import OwnerChannel

log = logging.getLogger("pfar.backups")

NAME_PREFIX = "pfar-"
# after a failure, the next try comes after this long (or every_hours, if shorter)
RETRY_SECONDS = 15 * 60.0
_BACKUP_FILES = frozenset({MANIFEST_NAME, "unlock.json", *DB_NAMES})


@dataclass(frozen=True, slots=True)
class BackupSchedule:
    directory: Path
    every: timedelta
    keep: int
    key_file: Path | None

    @classmethod
    def of(cls, home: Home, config: VaultBackupConfig) -> BackupSchedule | None:
        """The schedule `[vault.backup]` sets, or None when it sets no `dir`."""
        if config.dir is None:
            return None
        return cls(
            _under(home, config.dir),
            timedelta(hours=config.every_hours),
            config.keep,
            _under(home, config.key_file) if config.key_file else None,
        )


def _under(home: Home, raw: str) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else home.root / path


def ours(home: Home, directory: Path) -> list[tuple[Manifest, Path]]:
    """This vault's backups in `directory`, newest first."""
    info = keys.read_unlock(home.vault_dir)
    vault_id = info.vault_id if info is not None else None
    found = []
    try:
        entries = list(directory.iterdir())
    except OSError:  # not there (yet), or no directory: the backup itself says why
        return []
    for path in entries:
        if path.is_symlink() or not path.is_dir():
            continue
        manifest = is_pfar_backup(path)
        if manifest is None or manifest.home != str(home.root):
            continue
        if manifest.vault_id == vault_id:
            found.append((manifest, path))
    found.sort(key=lambda mp: mp[0].made_at_time(), reverse=True)
    return found


def prune(home: Home, directory: Path, keep: int) -> list[Path]:
    """Remove this vault's backups in `directory` beyond the newest `keep`."""
    removed = []
    for _, path in ours(home, directory)[keep:]:
        extra = sorted(p.name for p in path.iterdir() if p.name not in _BACKUP_FILES)
        if extra:
            log.warning("kept the old backup %s: it holds files pfar did not put there", path)
            continue
        shutil.rmtree(path)
        removed.append(path)
    return removed


def new_name(directory: Path, now: datetime) -> Path:
    base = directory / f"{NAME_PREFIX}{now:%Y%m%dT%H%M%SZ}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


@dataclass(frozen=True, slots=True)
class Made:
    dest: Path
    manifest: Manifest
    removed: list[Path]


class BackupsHost(Protocol):
    """What scheduled backups use of the kernel."""

    home: Home
    boot_id: str
    journal: Store
    audit: AuditLog
    owner: OwnerChannel


class ScheduledBackups:
    """The kernel's `pfar-backup` duty."""

    def __init__(self, kernel: BackupsHost, schedule: BackupSchedule) -> None:
        self._kernel = kernel
        self._schedule = schedule
        self._failing = False
        self._failures = 0

    async def run(self) -> None:
        key = keys.unlock(self._kernel.home)  # the key the kernel opened the vault with
        while True:
            try:
                wait = self._wait()
            except Exception as exc:  # a duty that ends stops the kernel: this is a backup
                log.warning("cannot look at %s: %s", self._schedule.directory, exc)
                wait = self._schedule.every.total_seconds()
            await asyncio.sleep(wait)
            if not await self.once(key):
                await asyncio.sleep(min(RETRY_SECONDS, self._schedule.every.total_seconds()))

    def _wait(self) -> float:
        """Seconds until the next backup is due: `every` after this vault's newest in
        the directory (now, if there is none)."""
        every = self._schedule.every.total_seconds()
        found = ours(self._kernel.home, self._schedule.directory)
        if not found:
            return 0.0
        due = found[0][0].made_at_time() + self._schedule.every
        return min(every, max(0.0, (due - datetime.now(UTC)).total_seconds()))

    async def once(self, key: keys.VaultKey | None) -> bool:
        audit = self._kernel.audit
        try:
            made = await asyncio.to_thread(self._make, key)
        except Exception as exc:
            log.warning("scheduled backup into %s failed: %s", self._schedule.directory, exc)
            audit.log("vault_backup_failed", dir=str(self._schedule.directory), error=str(exc))
            await self._tell_once(exc)
            return False
        self._failing = False
        audit.log(
            "vault_backup",
            dest=str(made.dest),
            position=made.manifest.position,
            removed=[str(p) for p in made.removed],
        )
        return True

    def _make(self, key: keys.VaultKey | None) -> Made:
        s = self._schedule
        home = self._kernel.home
        backup_key = None
        if s.key_file is not None:
            backup_key = BackupKey(read_key_file(s.key_file), s.key_file)
        s.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        dest = new_name(s.directory, datetime.now(UTC))
        manifest = make_backup(home, dest, key=key, backup_key=backup_key)
        return Made(dest, manifest, prune(home, s.directory, s.keep))

    async def _tell_once(self, exc: Exception) -> None:
        if self._failing:
            return
        self._failing = True
        self._failures += 1
        k = self._kernel
        text = (
            f"The scheduled backup of the vault into {self._schedule.directory} failed: "
            f"{exc}. pfar tries again; you are told again only if it fails after a backup "
            "that worked. `pfar vault backup DEST` makes one by hand."
        )
        key = BackupFailedKey(k.boot_id, self._failures)
        await k.journal.events.enqueue([OwnerMessage(key, MessageKind.notice, text, None)])
        k.owner.notify()
