"""Making a vault's key and keeping it where the owner chose (a key is never
overwritten: it may be the only copy); removing one made for a vault never made."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ...errors import VaultError
from ..home import Home
from .key_file import default_key_file, write_key_file
from .keychain import keychain_backend, keychain_delete, keychain_get, keychain_set
from .sources import Keychain, KeyFile, KeySource, Passphrase
from .unlock_file import UnlockInfo
from .vault_key import VaultKey

EncryptChoice = Literal["auto", "keychain", "file", "passphrase", "none"]


@dataclass(frozen=True, slots=True)
class NewKey:
    key: VaultKey
    info: UnlockInfo
    fallback_reason: str | None  # why a key file was chosen under "auto"


def create_key(
    home: Home,
    choice: EncryptChoice,
    *,
    key_file: Path | None = None,
    passphrase: str | None = None,
    vault_id: str | None = None,
    name: str | None = None,
) -> NewKey:
    """Make a key and keep it where `choice` says; return it with its unlock.json.

    "auto" is the keychain where a backend exists, else a key file in the default key
    directory (and the reason is returned, to be printed). `name` is the keychain
    account and the default key file's stem (the vault's id unless a rekey names the
    next key otherwise); an existing key is never overwritten."""
    vault_id = vault_id or uuid.uuid4().hex
    name = name or vault_id
    fallback: str | None = None
    if choice == "auto":
        if key_file is not None:
            choice = "file"
        elif keychain_backend() is not None:
            choice = "keychain"
        else:
            choice = "file"
            fallback = "no OS keychain is available here (no keyring backend)"
    source: KeySource
    if choice == "keychain":
        if keychain_backend() is None:
            raise VaultError(
                "no OS keychain is available here (no keyring backend): choose "
                "`--key-file PATH` or `--passphrase` instead; nothing was created"
            )
        key = VaultKey.generate()
        source = Keychain(account=name)
        if keychain_get(source) is not None:
            raise VaultError(
                f"{source.describe()} already holds a key; pfar never overwrites a key. "
                "Nothing was changed"
            )
        keychain_set(source, key)
    elif choice == "file":
        key = VaultKey.generate()
        path = (key_file or default_key_file(name)).expanduser().absolute()
        write_key_file(path, key, home)
        source = KeyFile(path)
    elif choice == "passphrase":
        if not passphrase:
            raise VaultError("an empty passphrase cannot lock a vault; nothing was created")
        source = Passphrase(salt=secrets.token_hex(16))
        key = source.derive(passphrase)
    else:
        raise ValueError(choice)
    info = UnlockInfo(
        vault_id=vault_id,
        source=source,
        check=key.check(vault_id),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return NewKey(key, info, fallback)


def discard(source: KeySource) -> None:
    """Remove a key pfar itself just made, for a vault that was never made (a failed init)."""
    match source:
        case Keychain():
            keychain_delete(source)
        case KeyFile(path=path):
            path.unlink(missing_ok=True)
        case Passphrase():
            pass
