"""The vault's key: where it is kept, how it is checked, and how a vault is unlocked.

An encrypted vault has one 256-bit key, random, used raw by SQLCipher (no key derivation
on every open). `vault/unlock.json` says where the key is kept and carries a check value
(an HMAC of the vault's id under the key), never the key: a wrong key, a missing key and
a damaged file are told apart before any database is opened.

Where the key is kept (`KeySource`, one of):
- `Keychain`: the OS keychain through `keyring` (Secret Service, macOS Keychain, Windows
  Credential Locker), service "pfar", account the vault's id;
- `KeyFile`: a file readable by the owner only, outside the home (a headless server);
- `Passphrase`: nothing is kept: the key is stretched from a passphrase with scrypt
  (memory-hard) each time pfar starts, read from the terminal or from the file descriptor
  named by `PFAR_PASSPHRASE_FD`.

The key never reaches argv, a log, an error message or a child's environment.

The modules: `vault_key` (the key), `sources` (where it is kept), `unlock_file`
(unlock.json), `keychain`, `key_file` and `passphrase` (each place, read and written),
`creating` (a new key, kept) and `unlocking` (a vault's key, found and checked).
"""

from .creating import EncryptChoice, NewKey, create_key, discard
from .key_file import (
    KEY_DIR_ENV,
    default_key_dir,
    default_key_file,
    read_key_file,
    write_key_file,
)
from .keychain import keychain_backend, keychain_delete, keychain_get, keychain_set
from .passphrase import PASSPHRASE_FD_ENV, read_passphrase
from .sources import KEYCHAIN_SERVICE, Keychain, KeyFile, KeySource, Passphrase, SourceName
from .unlock_file import (
    UNLOCK_NAME,
    KeySlot,
    UnlockInfo,
    is_plain_sqlite,
    read_unlock,
    unlock_path,
    write_unlock,
)
from .unlocking import forget, load_key, unlock
from .vault_key import VaultKey

__all__ = [
    "KEYCHAIN_SERVICE",
    "KEY_DIR_ENV",
    "PASSPHRASE_FD_ENV",
    "UNLOCK_NAME",
    "EncryptChoice",
    "KeyFile",
    "KeySlot",
    "KeySource",
    "Keychain",
    "NewKey",
    "Passphrase",
    "SourceName",
    "UnlockInfo",
    "VaultKey",
    "create_key",
    "default_key_dir",
    "default_key_file",
    "discard",
    "forget",
    "is_plain_sqlite",
    "keychain_backend",
    "keychain_delete",
    "keychain_get",
    "keychain_set",
    "load_key",
    "read_key_file",
    "read_passphrase",
    "read_unlock",
    "unlock",
    "unlock_path",
    "write_key_file",
    "write_unlock",
]
