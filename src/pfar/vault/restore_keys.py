"""The keys of a restore: the one that opens the backup's files (the vault's, or a separate
backup key), the restored vault's own, and where this machine is to keep it."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import BackupDamaged, PfarError, VaultError, VaultKeyMissing, VaultKeyWrong
from . import keys
from .key_place import checked, held_at, read_key_file, this_machines_place
from .keys import KeySource, UnlockInfo, VaultKey
from .manifest import Manifest


@dataclass(frozen=True, slots=True)
class RestoreKeys:
    file_key: VaultKey | None  # opens the backup's databases
    vault_key: VaultKey | None  # the restored vault's key (None: a plain vault)
    unlock: UnlockInfo | None  # the restored vault's unlock.json
    place: KeySource | None  # where the vault key is to be stored (None: it is there)


def plan_keys(
    src: Path, manifest: Manifest, key_file: Path | None, backup_key_file: Path | None
) -> RestoreKeys:
    info = None
    if "unlock.json" in manifest.files:
        info = keys.read_unlock(src)
    if manifest.encryption == "none":
        if key_file is not None or backup_key_file is not None:
            raise VaultError(
                f"{src} is the backup of a plain vault, not encrypted: it takes no key"
            )
        return RestoreKeys(None, None, None, None)
    if manifest.encryption == "vault-key":
        if backup_key_file is not None:
            raise VaultError(
                f"{src} is encrypted with the vault's key, not a separate backup key: give "
                "the vault's key with --key-file (or nothing, where this machine has it)"
            )
        if info is None:
            raise BackupDamaged(f"{src} has no unlock.json for its encrypted files")
        key, new_info, place = _vault_key(src, info, key_file)
        return RestoreKeys(key, key, new_info, place)
    if backup_key_file is None:
        raise VaultKeyMissing(
            f"{src} is encrypted with a separate backup key (its manifest says so): give "
            "it with --backup-key-file FILE"
        )
    backup_key = read_key_file(backup_key_file)
    if backup_key.check(manifest.backup_id) != manifest.backup_key_check:
        raise VaultKeyWrong(
            f"{backup_key_file} is not the backup key of {src} (its check value differs); "
            "nothing was restored"
        )
    if info is None:  # a plain vault's backup, encrypted apart: restored plain
        if key_file is not None:
            raise VaultError(f"{src} is the backup of a plain vault: --key-file has no use")
        return RestoreKeys(backup_key, None, None, None)
    key, new_info, place = _vault_key(src, info, key_file)
    return RestoreKeys(backup_key, key, new_info, place)


def _vault_key(
    src: Path, info: UnlockInfo, key_file: Path | None
) -> tuple[VaultKey, UnlockInfo, KeySource | None]:
    """The backed-up vault's key, the unlock.json to restore, and where the key is to be
    stored (None: where unlock.json says, it is already)."""
    if key_file is None:
        try:
            return keys.load_key(info), info, None
        except (VaultKeyMissing, VaultKeyWrong) as exc:
            raise type(exc)(
                f"{exc} (for the backup {src}). On another machine, give the vault's key "
                "with --key-file FILE: the file `pfar vault key export` wrote"
            ) from None
    key = checked(read_key_file(key_file), info, key_file.expanduser().absolute())
    with contextlib.suppress(PfarError):
        if held_at(info.source) == key:  # this machine keeps it where unlock.json says
            return key, info, None
    place = this_machines_place(info.vault_id)
    return key, dataclasses.replace(info, source=place), place
