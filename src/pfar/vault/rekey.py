"""`pfar vault rekey`: the vault moved to a new key (and, if asked, a new place for it),
one file at a time, so that a run killed at any point loses nothing.

The home lock is held throughout. The order:
1. the new key is made and kept (a new keychain entry or key file, never over the old
   one; or a new passphrase), then unlock.json names both keys: `key` (the old one)
   and `next` (the new one). From then on some files may be under either key, so every
   other command refuses the vault until a rekey finishes ("finish with `pfar vault
   rekey`"), and a resumed rekey tries each file with the new key, then the old;
2. each file still under the old key is copied under the new one, checked, and put in
   its place (reencrypt.py);
3. once every file is under the new key, unlock.json names it as `key`, and the old
   one as `old` (the vault opens normally again);
4. the old key is removed from where it was kept (a key file deleted, a keychain entry
   deleted; a passphrase has nothing to remove), after checking that what is there is
   that key; then `old` is dropped.
A run killed before step 1 is complete leaves the vault under its old key as it was
(and, at most, a new key kept for nothing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ..errors import VaultCorrupt, VaultError
from . import keys, reencrypt
from .durable import fsync_dir
from .home import Home
from .lock import vault_command_lock

NEW_PASSPHRASE_FD_ENV = "PFAR_NEW_PASSPHRASE_FD"
RekeyChoice = Literal["keychain", "file", "passphrase"]


@dataclass(slots=True)
class RekeyResult:
    info: keys.UnlockInfo  # the vault's unlock.json at the end
    old_source: keys.KeySource | None  # where the old key was (None: not known, resumed late)
    resumed: bool
    rekeyed: list[str] = field(default_factory=list)
    found_rekeyed: list[str] = field(default_factory=list)  # by the run this one finished
    old_key: str = ""  # what became of the old key, in words


def rekey_vault(
    home: Home,
    choice: RekeyChoice | None = None,
    *,
    key_file: Path | None = None,
    new_passphrase: Callable[[], str] | None = None,
    keep_old_key: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> RekeyResult:
    """Put `home`'s vault under a new key, or finish an interrupted rekey. `choice` None
    keeps the key in the same kind of place as the old one."""
    files = reencrypt.vault_files(home)
    with vault_command_lock(home, "pfar vault rekey"):
        info = keys.read_unlock(home.vault_dir)
        if info is None:
            raise VaultError(
                f"{home.vault_dir} is not encrypted: there is no key to change. "
                "`pfar vault encrypt` encrypts it; nothing was changed"
            )
        result = RekeyResult(info=info, old_source=None, resumed=True)
        # both keys are read once (a passphrase on a descriptor can be read only once);
        # a resumed run finds them again from unlock.json, the old one only if needed
        new_key: keys.VaultKey | None = None
        old_key: keys.VaultKey | None = None
        if info.next is None and info.old is None:
            info, old_key, new_key = _begin(
                home, files, info, choice, key_file, new_passphrase, progress
            )
            result.resumed = False
        elif choice is not None or key_file is not None:
            progress(
                "finishing the interrupted key change (the new key is where that run put "
                "it: the options given are not used)"
            )
        if info.next is not None:
            result.old_source = info.source
            info = _move_files(home, files, info, old_key, new_key, result, progress)
        if info.old is not None:
            result.old_source = info.old.source
            result.old_key = _retire(info, keep_old_key)
            reencrypt.fault("rekey", "old_removed")
            info = dataclasses.replace(info, old=None)
            keys.write_unlock(home.vault_dir, info)
        keys.forget(home)
        result.info = info
        return result


def _begin(
    home: Home,
    files: list[reencrypt.VaultFile],
    info: keys.UnlockInfo,
    choice: RekeyChoice | None,
    key_file: Path | None,
    new_passphrase: Callable[[], str] | None,
    progress: Callable[[str], None],
) -> tuple[keys.UnlockInfo, keys.VaultKey, keys.VaultKey]:
    for f in files:
        if not f.path.exists():
            raise VaultError(f"{f.path} does not exist; nothing was changed")
        if keys.is_plain_sqlite(f.path):
            raise VaultError(
                f"{f.path} is still a plain SQLite file: an encryption was interrupted. "
                "Finish it with `pfar vault encrypt` first; nothing was changed"
            )
    old_key = keys.load_key(info)
    for f in files:
        reencrypt.check_readable(f.path, old_key)  # before the new key: damage stops here
    kind = choice or _kind(info.source)
    name = f"{info.vault_id}.{secrets.token_hex(4)}"
    if kind == "file" and key_file is None and isinstance(info.source, keys.KeyFile):
        key_file = info.source.path.parent / f"{name}.key"  # beside the old one
    passphrase = None
    if kind == "passphrase":
        if new_passphrase is None:
            raise VaultError("a new passphrase is needed and none was given; nothing was changed")
        passphrase = new_passphrase()
    new = keys.create_key(
        home, kind, key_file=key_file, passphrase=passphrase, vault_id=info.vault_id, name=name
    )
    reencrypt.fault("rekey", "key_created")
    info = dataclasses.replace(info, next=keys.KeySlot(new.info.source, new.info.check))
    keys.write_unlock(home.vault_dir, info)
    reencrypt.fault("rekey", "next_written")
    progress(f"new key: {new.info.source.describe()}")
    return info, old_key, new.key


def _move_files(
    home: Home,
    files: list[reencrypt.VaultFile],
    info: keys.UnlockInfo,
    old_key: keys.VaultKey | None,
    new_key: keys.VaultKey | None,
    result: RekeyResult,
    progress: Callable[[str], None],
) -> keys.UnlockInfo:
    assert info.next is not None
    if new_key is None:
        new_key = _load_next(info)
    for f in files:
        if reencrypt.staging_path(f.path, "rekey").exists() and result.resumed:
            progress(f"removed the partial copy of {f.path.name} a killed run left")
        reencrypt.remove_staging(f.path, "rekey")
        if reencrypt.opens_with(f.path, new_key):
            result.found_rekeyed.append(f.path.name)
            continue
        if old_key is None:
            old_key = keys.load_key(dataclasses.replace(info, next=None))
        if not reencrypt.opens_with(f.path, old_key):
            raise VaultCorrupt(
                f"{f.path} opens with neither the old key nor the new one: it is damaged. "
                "The rekey stopped there and changed nothing more; restore the file from a "
                "backup, then run `pfar vault rekey` again"
            )
        reencrypt.reencrypt(f, old_key, new_key, "rekey")
        progress(f"rekeyed {f.path}")
        result.rekeyed.append(f.path.name)
    switched = keys.UnlockInfo(
        vault_id=info.vault_id,
        source=info.next.source,
        check=info.next.check,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        old=keys.KeySlot(info.source, info.check),
    )
    keys.write_unlock(home.vault_dir, switched)
    reencrypt.fault("rekey", "switched")
    return switched


def _load_next(info: keys.UnlockInfo) -> keys.VaultKey:
    assert info.next is not None
    target = dataclasses.replace(info, source=info.next.source, check=info.next.check, next=None)
    passphrase = None
    if isinstance(info.next.source, keys.Passphrase):
        passphrase = keys.read_passphrase("new vault passphrase: ", env=NEW_PASSPHRASE_FD_ENV)
    return keys.load_key(target, passphrase=passphrase)


def _retire(info: keys.UnlockInfo, keep: bool) -> str:
    """Remove the old key from its place, if that place still holds it; say what became
    of it."""
    assert info.old is not None
    source, check = info.old.source, info.old.check
    if isinstance(source, keys.Passphrase):
        return "the old passphrase no longer opens the vault"
    if keep:
        return f"the old key was kept in {source.describe()} (--keep-old-key)"
    if isinstance(source, keys.KeyFile):
        try:
            held = keys.VaultKey.from_hex(source.path.read_text(encoding="ascii"), "")
        except FileNotFoundError:
            return f"the old key file {source.path} is gone"
        except (OSError, UnicodeDecodeError, VaultError):
            return f"{source.path} was left as it is: it does not hold the old key"
        if held.check(info.vault_id) != check:
            return f"{source.path} was left as it is: it does not hold the old key"
        source.path.unlink()
        with contextlib.suppress(OSError):
            fsync_dir(source.path.parent)
        return f"the old key file {source.path} was removed"
    try:
        text = keys.keychain_get(source)
    except VaultError:
        text = None
    if text is None:
        return f"the old key is no longer in {source.describe()}"
    try:
        held = keys.VaultKey.from_hex(text, "")
    except VaultError:
        return f"{source.describe()} was left as it is: it does not hold the old key"
    if held.check(info.vault_id) != check:
        return f"{source.describe()} was left as it is: it does not hold the old key"
    keys.keychain_delete(source)
    return f"the old key was removed from {source.describe()}"


def _kind(source: keys.KeySource) -> RekeyChoice:
    match source:
        case keys.Keychain():
            return "keychain"
        case keys.KeyFile():
            return "file"
        case keys.Passphrase():
            return "passphrase"
