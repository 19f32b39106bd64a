"""`vault/unlock.json`: where this vault's key is kept and its check value, never the key;
and telling a plain SQLite file from an encrypted one."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import VaultCorrupt, VaultError
from ..durable import fsync_dir
from .sources import Keychain, KeyFile, KeySource, Passphrase

UNLOCK_NAME = "unlock.json"
_PLAIN_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True, slots=True)
class KeySlot:
    """A key other than the current one, named in unlock.json while a key change
    (`pfar vault rekey`) is under way: where it is kept and its check value."""

    source: KeySource
    check: str


@dataclass(frozen=True, slots=True)
class UnlockInfo:
    """`vault/unlock.json`: how to unlock this vault. Holds no secret.

    `next` is set while a rekey moves the files to a new key (some files may be under
    either key); `old` once every file is under the new key, until the old key is
    removed from where it was kept."""

    vault_id: str
    source: KeySource
    check: str
    created_at: str
    next: KeySlot | None = None
    old: KeySlot | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": 1,
            "vault_id": self.vault_id,
            "cipher": "sqlcipher4",
            "key": source_json(self.source),
            "check": self.check,
            "created_at": self.created_at,
        }
        for name, slot in (("next", self.next), ("old", self.old)):
            if slot is not None:
                data[name] = {"key": source_json(slot.source), "check": slot.check}
        return data

    @classmethod
    def parse(cls, data: Any, where: Path) -> UnlockInfo:
        try:
            slots = {
                name: KeySlot(parse_source(data[name]["key"]), str(data[name]["check"]))
                for name in ("next", "old")
                if data.get(name) is not None
            }
            return cls(
                vault_id=str(data["vault_id"]),
                source=parse_source(data["key"]),
                check=str(data["check"]),
                created_at=str(data.get("created_at", "")),
                **slots,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise VaultCorrupt(
                f"{where} is not readable ({exc!s}); it says how to unlock the encrypted vault. "
                "Restore it from a backup (the databases were not touched)"
            ) from None


def source_json(source: KeySource) -> dict[str, Any]:
    match source:
        case Keychain(account=account, service=service):
            return {"kind": "keychain", "service": service, "account": account}
        case KeyFile(path=path):
            return {"kind": "file", "path": str(path)}
        case Passphrase(salt=salt, n=n, r=r, p=p):
            return {"kind": "passphrase", "kdf": "scrypt", "salt": salt, "n": n, "r": r, "p": p}


def parse_source(src: Any) -> KeySource:
    kind = src["kind"]
    if kind == "keychain":
        return Keychain(account=str(src["account"]), service=str(src["service"]))
    if kind == "file":
        return KeyFile(Path(str(src["path"])))
    if kind == "passphrase":
        return Passphrase(salt=str(src["salt"]), n=int(src["n"]), r=int(src["r"]), p=int(src["p"]))
    raise ValueError(f"key.kind {kind!r} is not keychain, file or passphrase")


def unlock_path(vault_dir: Path) -> Path:
    return vault_dir / UNLOCK_NAME


def read_unlock(vault_dir: Path) -> UnlockInfo | None:
    """This vault's unlock.json, or None for a plain vault."""
    path = unlock_path(vault_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise VaultError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise VaultCorrupt(
            f"{path} is not JSON ({exc}); it says how to unlock the encrypted vault. "
            "Restore it from a backup (the databases were not touched)"
        ) from None
    return UnlockInfo.parse(data, path)


def write_unlock(vault_dir: Path, info: UnlockInfo) -> None:
    """Replace unlock.json atomically (written, synced, renamed, directory synced)."""
    path = unlock_path(vault_dir)
    tmp = path.with_name(f".{UNLOCK_NAME}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (json.dumps(info.to_json(), indent=2) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(vault_dir)


def is_plain_sqlite(path: Path) -> bool | None:
    """True for a plain SQLite file, False for anything else (encrypted), None if empty
    or absent."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return None
    if not head:
        return None
    return head == _PLAIN_HEADER
