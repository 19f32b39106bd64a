"""The backup's files copied into a staging directory in the home (exported under the
vault's key when the backup has a key of its own), synced and checked again, before they
take the vault's place."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import BackupDamaged
from . import durable, keys
from .manifest import DB_NAMES, Manifest
from .restore_checks import check_integrity
from .restore_keys import RestoreKeys
from .sqlite import connect


def stage(src: Path, manifest: Manifest, restore_keys: RestoreKeys, staging: Path) -> None:
    """The backup's databases in `staging`, under the vault's key, synced and checked."""
    vault_key = restore_keys.vault_key
    for name in [n for n in DB_NAMES if n in manifest.files]:
        target = staging / name
        if manifest.encryption == "backup-key":
            copy = staging / f".{name}.backup"
            _copy_checked(src / name, copy, manifest)
            assert restore_keys.file_key is not None
            conn = connect(copy, key=restore_keys.file_key)
            try:
                into = f"KEY {vault_key.pragma()}" if vault_key is not None else "KEY ''"
                conn.execute(f"ATTACH DATABASE ? AS restored {into}", (str(target),))
                conn.execute("SELECT sqlcipher_export('restored')")
                conn.execute("DETACH DATABASE restored")
            finally:
                conn.close()
            for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
                leftover.unlink(missing_ok=True)
            os.chmod(target, 0o600)
        else:
            _copy_checked(src / name, target, manifest)
        conn = connect(target, key=vault_key, readonly=True)
        try:
            check_integrity(conn, target, vault_key is not None)
        finally:
            conn.close()
        durable.fsync_file(target)
    if restore_keys.unlock is not None:
        keys.write_unlock(staging, restore_keys.unlock)


def _copy_checked(source: Path, target: Path, manifest: Manifest) -> None:
    if durable.copy_synced(source, target) != manifest.files[source.name].sha256:
        raise BackupDamaged(
            f"{source} changed while it was restored (its sha256 differs from the "
            "manifest's now); nothing was restored"
        )
