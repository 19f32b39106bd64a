"""Where a vault's key is kept: the OS keychain, a key file, or nowhere (a passphrase
stretched with scrypt at every start). Records only: reading and writing each place is
`keychain`, `key_file` and `passphrase`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .vault_key import VaultKey

KEYCHAIN_SERVICE = "pfar"

# scrypt's cost: 128 MiB and about half a second here, OWASP's figure for scrypt
_SCRYPT_N = 2**17
_SCRYPT_R = 8
_SCRYPT_P = 1


@dataclass(frozen=True, slots=True)
class Keychain:
    account: str
    service: str = KEYCHAIN_SERVICE
    kind: Literal["keychain"] = "keychain"

    def describe(self) -> str:
        return f"the OS keychain (service {self.service!r}, account {self.account!r})"


@dataclass(frozen=True, slots=True)
class KeyFile:
    path: Path
    kind: Literal["file"] = "file"

    def describe(self) -> str:
        return f"the key file {self.path}"


@dataclass(frozen=True, slots=True)
class Passphrase:
    salt: str  # hex
    n: int = _SCRYPT_N
    r: int = _SCRYPT_R
    p: int = _SCRYPT_P
    kind: Literal["passphrase"] = "passphrase"

    def describe(self) -> str:
        return f"a passphrase (scrypt, N={self.n}, r={self.r}, p={self.p})"

    def derive(self, passphrase: str) -> VaultKey:
        raw = hashlib.scrypt(
            passphrase.encode(),
            salt=bytes.fromhex(self.salt),
            n=self.n,
            r=self.r,
            p=self.p,
            maxmem=256 * 1024 * 1024,
            dklen=32,
        )
        return VaultKey(raw)


KeySource = Keychain | KeyFile | Passphrase
SourceName = Literal["keychain", "file", "passphrase"]
