"""The vault's key itself: 32 random bytes that never show in a repr, a log or an error."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from ...errors import VaultKeyWrong

_CHECK_LABEL = b"pfar vault key check v1\x00"


class VaultKey:
    """32 random bytes. Shown as `VaultKey(…)`: printing one never prints the key."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise ValueError("a vault key is 32 bytes")
        self._raw = raw

    @classmethod
    def generate(cls) -> VaultKey:
        return cls(secrets.token_bytes(32))

    @classmethod
    def from_hex(cls, text: str, where: str) -> VaultKey:
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise VaultKeyWrong(
                f"{where} does not hold a vault key (64 hexadecimal digits); nothing was opened"
            )
        return cls(raw)

    def pragma(self) -> str:
        """The value of SQLCipher's `PRAGMA key`: a raw key, used as it is (no KDF)."""
        return f"\"x'{self._raw.hex()}'\""

    def hex(self) -> str:
        """For the key's own storage (keychain entry, key file, export): nowhere else."""
        return self._raw.hex()

    def check(self, vault_id: str) -> str:
        return hmac.new(self._raw, _CHECK_LABEL + vault_id.encode(), hashlib.sha256).hexdigest()[
            :32
        ]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VaultKey) and hmac.compare_digest(self._raw, other._raw)

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return "VaultKey(…)"

    __str__ = __repr__
