"""Moving a vault's key between machines: `pfar vault key export` writes it to a new file,
`pfar vault key import` and `pfar vault restore --key-file` put it where this machine
keeps keys. A key that is already kept somewhere is never overwritten (it may be the
only copy of another vault's key); the same key found there is left as it is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import VaultError, VaultKeyMissing, VaultKeyWrong
from . import keys
from .home import Home
from .keys import Keychain, KeyFile, KeySource, Passphrase, UnlockInfo, VaultKey
from .manifest import is_pfar_backup


def read_key_file(path: Path) -> VaultKey:
    """The key in a file the owner names (what `pfar vault key export` wrote)."""
    path = path.expanduser().absolute()
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise VaultKeyMissing(f"the key file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise VaultKeyMissing(f"the key file {path} cannot be read ({exc})") from None
    if st.st_mode & 0o077:
        raise VaultKeyMissing(
            f"the key file {path} is readable by others (mode {st.st_mode & 0o777:o}); "
            f"refused. Fix it with `chmod 600 {path}`"
        )
    return keys.VaultKey.from_hex(text, f"the key file {path}")


def checked(key: VaultKey, info: UnlockInfo, where: Path) -> VaultKey:
    if key.check(info.vault_id) != info.check:
        raise VaultKeyWrong(
            f"{where} holds a vault key, but not the key of vault {info.vault_id} (its check "
            "value differs); nothing was changed. Give the key exported from that vault"
        )
    return key


def this_machines_place(vault_id: str) -> KeySource:
    """Where a new key goes here: the OS keychain if one exists, else the default key file."""
    if keys.keychain_backend() is not None:
        return Keychain(account=vault_id)
    return KeyFile(keys.default_key_file(vault_id))


def held_at(source: KeySource) -> VaultKey | None:
    """The key kept at `source` now, or None where none is."""
    match source:
        case Keychain():
            text = keys.keychain_get(source)
            return None if text is None else VaultKey.from_hex(text, source.describe())
        case KeyFile(path=path):
            if not path.exists():
                return None
            return read_key_file(path)
        case Passphrase():
            return None


def check_placeable(source: KeySource, key: VaultKey) -> None:
    """Raise when storing `key` at `source` would overwrite another key; before anything
    is changed, so a refusal leaves everything as it was."""
    if isinstance(source, Passphrase):
        raise VaultError(
            "this vault's key comes from a passphrase: there is no key to store. Type the "
            "passphrase when pfar asks for it"
        )
    if isinstance(source, Keychain) and keys.keychain_backend() is None:
        raise VaultError(f"{source.describe()} is not available here (no keyring backend)")
    held = held_at(source)
    if held is not None and held != key:
        raise VaultError(
            f"{source.describe()} already holds another key, and pfar never overwrites a "
            "key (it may be the only copy). Keep a copy of it and remove it, then try again"
        )


def store(home: Home, source: KeySource, key: VaultKey) -> bool:
    """Keep `key` at `source`; False when it was already there."""
    check_placeable(source, key)
    if held_at(source) is not None:
        return False
    match source:
        case Keychain():
            keys.keychain_set(source, key)
        case KeyFile(path=path):
            keys.write_key_file(path, key, home)
        case Passphrase():
            raise AssertionError("refused by check_placeable")
    return True


def export_key(home: Home, dest: Path) -> None:
    """Write this vault's key to the new owner-only file `dest` (outside the home, and
    not beside a backup: a key kept with what it locks protects nothing)."""
    key = keys.unlock(home)
    if key is None:
        raise VaultError(f"{home.vault_dir} is not encrypted: it has no key to export")
    dest = dest.expanduser().absolute()
    if is_pfar_backup(dest.parent) is not None:
        raise VaultError(
            f"{dest.parent} is a backup of the vault: a key kept beside the backup it "
            "unlocks protects nothing. Choose a place apart from your backups"
        )
    keys.write_key_file(dest, key, home)


def import_key(home: Home, path: Path) -> tuple[UnlockInfo, bool]:
    """Store the key in `path` where this vault's unlock.json says, after checking it.
    Where unlock.json names a keychain this machine does not have, the key goes to the
    default key file and unlock.json says so. Returns the unlock info and whether the
    key was stored (False: it was there already)."""
    info = keys.read_unlock(home.vault_dir)
    if info is None:
        raise VaultError(f"{home.vault_dir} is not encrypted: it takes no key")
    key = checked(read_key_file(path), info, path.expanduser().absolute())
    source = info.source
    if isinstance(source, Keychain) and keys.keychain_backend() is None:
        source = KeyFile(keys.default_key_file(info.vault_id))
    stored = store(home, source, key)
    if source != info.source:
        info = dataclasses.replace(info, source=source)
        keys.write_unlock(home.vault_dir, info)
    keys.forget(home)
    return info, stored
