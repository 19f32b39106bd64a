"""Unlocking a vault: its key found where unlock.json says, checked against the check
value, and kept for the rest of the process."""

from __future__ import annotations

import hmac

from ...errors import VaultError, VaultKeyMissing, VaultKeyWrong
from ..home import Home
from .key_file import read_key_file
from .keychain import keychain_get
from .passphrase import read_passphrase
from .sources import Keychain, KeyFile, Passphrase
from .unlock_file import UnlockInfo, read_unlock
from .vault_key import VaultKey


def load_key(info: UnlockInfo, *, passphrase: str | None = None) -> VaultKey:
    """The key `info` names, checked against its check value."""
    match info.source:
        case Keychain() as source:
            text = keychain_get(source)
            if text is None:
                raise VaultKeyMissing(
                    f"the vault's key is not in {source.describe()}. If this vault was "
                    "restored or moved from another machine, import its key with "
                    "`pfar vault key import FILE`; otherwise restore the keychain entry"
                )
            key = VaultKey.from_hex(text, source.describe())
        case KeyFile() as source:
            key = read_key_file(source)
        case Passphrase() as source:
            key = source.derive(passphrase if passphrase is not None else read_passphrase())
    if not hmac.compare_digest(key.check(info.vault_id), info.check):
        where = info.source.describe()
        raise VaultKeyWrong(
            f"the key from {where} is not this vault's key (vault {info.vault_id}; its check "
            "value differs). The vault files were not touched and are not damaged for it: "
            + (
                "type the passphrase again"
                if isinstance(info.source, Passphrase)
                else "put this vault's key there (from where you kept a copy)"
            )
        )
    return key


_cache: dict[tuple[str, str], VaultKey] = {}


def unlock(home: Home) -> VaultKey | None:
    """This home's vault key (None for a plain vault), found once per process."""
    info = read_unlock(home.vault_dir)
    if info is None:
        return None
    if info.next is not None:
        raise VaultError(
            f"a change of the vault's key (`pfar vault rekey`) was interrupted: some files "
            f"of {home.vault_dir} are under the old key, some under the new one. Finish it "
            "with `pfar vault rekey` (it needs both keys); nothing was opened"
        )
    cached = _cache.get((str(home.vault_dir), info.check))
    if cached is not None:
        return cached
    key = load_key(info)
    _cache[(str(home.vault_dir), info.check)] = key
    return key


def forget(home: Home) -> None:
    """Drop the cached key of `home` (after a rekey or a restore)."""
    for entry in [e for e in _cache if e[0] == str(home.vault_dir)]:
        del _cache[entry]
