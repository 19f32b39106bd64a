"""`pfar vault restore`: a backup back in place of a home's vault, with no kernel running.

In this order, and the home is touched only at the last step:
1. the backup is checked: every file against its manifest's sha256, the key against its
   check value, each database opened with it and `quick_check`ed (and
   `cipher_integrity_check`ed when encrypted);
2. the current vault is read: a journal further along than the backup's (a higher
   position), or one that cannot be read, is not replaced without `--force`, and the
   refusal names what would be lost;
3. the backup's files are copied (and, for a backup under a separate backup key,
   exported under the vault's key) into a staging directory in the home, synced and
   checked again;
4. the vault's key is stored where this machine keeps keys, when it came with
   `--key-file`;
5. `vault/` is renamed to `vault.before-restore-<time>/` (pfar never deletes it), the
   staging directory to `vault/`, and the home directory is synced.

The restored vault holds `restored.json`: the backup's manifest, the acknowledged record
the replaced vault had (it moved aside with it: it describes a journal that is no longer
there), and when. The next start reads it to say which tasks are as of the backup and
what was lost since.

The steps have modules of their own: `restore_checks` (1), `restore_replaced` (2, and
what restored.json says of the replaced vault), `restore_keys` (the keys, 4) and
`restore_staging` (3).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import VaultLocked
from . import durable, keys
from .backup import LAST_BACKUP_NAME
from .home import Home, HomeLock
from .key_place import check_placeable, store
from .manifest import Manifest, read_manifest
from .restore_checks import check_databases, check_hashes
from .restore_keys import plan_keys
from .restore_replaced import (
    ASIDE_PREFIX,
    WATERMARK_NAMES,
    CurrentVault,
    TaskRow,
    aside_name,
    lost,
    read_current,
    refuse_if_newer,
    replaced_json,
    watermark,
)
from .restore_staging import stage

RESTORED_NAME = "restored.json"
_STAGING_PREFIX = ".vault.restoring-"


@dataclass(frozen=True, slots=True)
class Restored:
    manifest: Manifest
    aside: Path | None  # where the replaced vault went
    replaced: CurrentVault | None
    key_stored: str | None  # where the key was stored, when the restore stored it


def restore(
    home: Home,
    src: Path,
    *,
    force: bool = False,
    key_file: Path | None = None,
    backup_key_file: Path | None = None,
) -> Restored:
    src = src.expanduser().absolute()
    lock = HomeLock(home)
    try:
        lock.acquire()
    except VaultLocked:
        raise VaultLocked(
            f"a kernel is running on {home.root}: stop it first (a restore replaces the "
            "vault under it); nothing was changed"
        ) from None
    try:
        return _restore(home, src, force, key_file, backup_key_file)
    finally:
        lock.release()


def _restore(
    home: Home, src: Path, force: bool, key_file: Path | None, backup_key_file: Path | None
) -> Restored:
    manifest = read_manifest(src)
    check_hashes(src, manifest)
    restore_keys = plan_keys(src, manifest, key_file, backup_key_file)
    backup_tasks = check_databases(src, manifest, restore_keys.file_key)
    current = read_current(home)
    now = datetime.now(UTC)
    aside = aside_name(home, now) if home.vault_dir.exists() else None
    if current is not None and not force:
        refuse_if_newer(home, manifest, current, backup_tasks, aside)
    if restore_keys.place is not None and restore_keys.vault_key is not None:
        check_placeable(restore_keys.place, restore_keys.vault_key)
    for stale in home.root.glob(f"{_STAGING_PREFIX}*"):  # an interrupted restore's
        shutil.rmtree(stale, ignore_errors=True)
    staging = home.root / f"{_STAGING_PREFIX}{now:%Y%m%dT%H%M%S}-{os.getpid()}"
    staging.mkdir(mode=0o700)
    try:
        stage(src, manifest, restore_keys, staging)
        durable.write_json(
            staging / LAST_BACKUP_NAME,
            {"at": manifest.made_at, "dest": str(src), "position": manifest.position},
        )
        durable.write_json(
            staging / RESTORED_NAME,
            {
                "backup": manifest.to_json(),
                "previous": watermark(home),
                "restored_at": now.isoformat(timespec="seconds"),
                "source": str(src),
                "moved_aside": str(aside) if aside else None,
                "replaced": replaced_json(current),
            },
        )
        durable.fsync_dir(staging)
        stored = None
        if restore_keys.place is not None and restore_keys.vault_key is not None:
            if store(home, restore_keys.place, restore_keys.vault_key):
                stored = restore_keys.place.describe()
        if aside is not None:
            os.rename(home.vault_dir, aside)
        os.rename(staging, home.vault_dir)
        durable.fsync_dir(home.root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    keys.forget(home)
    return Restored(manifest, aside, current, stored)


__all__ = [
    "ASIDE_PREFIX",
    "RESTORED_NAME",
    "WATERMARK_NAMES",
    "CurrentVault",
    "Restored",
    "TaskRow",
    "lost",
    "read_current",
    "restore",
]
