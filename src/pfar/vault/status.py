"""`pfar vault status`: what the vault is at rest, read from its files alone.

It works with a kernel running or not (it takes no lock, writes nothing, and opens a
database only read-only), and asks for no key it does not need: whether the vault is
encrypted, where its key is kept, the files' sizes, and the last integrity check and
backup (`vault/last-check.json`, `vault/last-backup.json`, written by those commands)
need none. The key is looked for only to read the schema versions; when it cannot be
had (a missing key file, a keychain without the entry, a passphrase that was not given
on PFAR_PASSPHRASE_FD: status never prompts) it says so instead of failing.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import VaultError
from .driver import sqlite
from .home import Home, HomeLock
from .keys import (
    PASSPHRASE_FD_ENV,
    KeySource,
    Passphrase,
    UnlockInfo,
    VaultKey,
    is_plain_sqlite,
    load_key,
    read_unlock,
)
from .reencrypt import open_with, vault_files
from .schema import schema_version

LAST_CHECK = "last-check.json"
LAST_BACKUP = "last-backup.json"

State = Literal["encrypted", "plain", "encrypting", "rekeying", "missing"]


@dataclass(frozen=True, slots=True)
class FileStatus:
    name: str
    kind: str
    exists: bool
    size: int | None
    wal_size: int | None  # None: no -wal beside it
    encrypted: bool | None  # None: absent or empty
    schema_version: int | None  # None: not read (no key, or damaged)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class KeyStatus:
    kind: str  # "keychain", "file", "passphrase"
    where: str  # describe(): never the key
    available: bool
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class VaultStatus:
    home: str
    vault: str
    state: State
    cipher: str | None
    vault_id: str | None
    key: KeyStatus | None
    next_key: KeyStatus | None  # a rekey under way: the key it moves the files to
    old_key: str | None  # a rekey done but for removing the old key: where it is
    files: list[FileStatus]
    kernel_running: bool
    last_check: dict[str, Any] | None
    last_backup: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def vault_status(home: Home) -> VaultStatus:
    vault = home.vault_dir
    info: UnlockInfo | None = None
    unlock_problem: str | None = None
    try:
        info = read_unlock(vault)
    except VaultError as exc:
        unlock_problem = str(exc)
    files = vault_files(home)
    headers = {f.kind: is_plain_sqlite(f.path) for f in files}
    present = [f for f in files if f.path.exists()]
    key: VaultKey | None = None
    key_status: KeyStatus | None = None
    next_status: KeyStatus | None = None
    if info is not None:
        key, key_status = _key(info.source, info)
        if info.next is not None:
            next_status = KeyStatus(
                info.next.source.kind,
                info.next.source.describe(),
                available=False,
                problem="not looked for: `pfar vault rekey` finishes moving the files to it",
            )
    elif unlock_problem is not None:
        key_status = KeyStatus("unknown", "unknown", available=False, problem=unlock_problem)
    plain = [f for f in present if headers[f.kind]]
    state: State
    if not present:
        state = "missing"
    elif info is None and unlock_problem is None:
        state = "plain"
    elif info is not None and info.next is not None:
        state = "rekeying"
    elif plain:
        state = "encrypting"
    else:
        state = "encrypted"
    running = HomeLock(home).is_held_elsewhere()
    statuses = []
    for f in files:
        encrypted = None if headers[f.kind] is None else not headers[f.kind]
        use = None if headers[f.kind] else key
        version, problem = None, None
        if f.path.exists() and headers[f.kind] is not None:
            if encrypted and key is None:
                problem = "not read: the key is not available"
            elif state == "rekeying":
                problem = "not read: a rekey is under way"
            else:
                version, problem = _schema_version(f.path, use, running)
        statuses.append(
            FileStatus(
                name=f.path.name,
                kind=f.kind,
                exists=f.path.exists(),
                size=_size(f.path),
                wal_size=_size(Path(f"{f.path}-wal")),
                encrypted=encrypted,
                schema_version=version,
                problem=problem,
            )
        )
    return VaultStatus(
        home=str(home.root),
        vault=str(vault),
        state=state,
        cipher=_cipher() if info is not None else None,
        vault_id=info.vault_id if info is not None else None,
        key=key_status,
        next_key=next_status,
        old_key=info.old.source.describe() if info is not None and info.old else None,
        files=statuses,
        kernel_running=running,
        last_check=_record(vault / LAST_CHECK),
        last_backup=_record(vault / LAST_BACKUP),
    )


def _key(source: KeySource, info: UnlockInfo) -> tuple[VaultKey | None, KeyStatus]:
    if isinstance(source, Passphrase) and not os.environ.get(PASSPHRASE_FD_ENV):
        return None, KeyStatus(
            source.kind,
            source.describe(),
            available=False,
            problem=f"a passphrase, not asked for here: give it on {PASSPHRASE_FD_ENV} to "
            "read the schema versions",
        )
    try:
        key = load_key(info)
    except VaultError as exc:
        return None, KeyStatus(source.kind, source.describe(), available=False, problem=str(exc))
    return key, KeyStatus(source.kind, source.describe(), available=True)


def _schema_version(
    path: Path, key: VaultKey | None, kernel_running: bool
) -> tuple[int | None, str | None]:
    # read without leaving a trace: a file no kernel has open and whose WAL is empty is
    # read as it is (SQLite would otherwise make its -wal and -shm, and leave them)
    wal = _size(Path(f"{path}-wal"))
    quiet = not kernel_running and not wal
    try:
        conn = open_with(path, key, readonly=True, immutable=quiet)
    except sqlite.Error as exc:
        return None, f"cannot be read ({exc})"
    try:
        return schema_version(conn), None
    except sqlite.Error as exc:
        return None, f"cannot be read ({exc})"
    finally:
        conn.close()


def _cipher() -> str:
    """SQLCipher's version and its page cipher (AES-256-CBC in every SQLCipher 4; the
    HMAC as this build sets it). The key is raw: no KDF runs on it."""
    conn = sqlite.connect(":memory:")
    try:
        version = conn.execute("PRAGMA cipher_version").fetchone()
        hmac = conn.execute("PRAGMA cipher_default_hmac_algorithm").fetchone()
    finally:
        conn.close()
    return (
        f"SQLCipher {version[0] if version else '?'}: AES-256-CBC, "
        f"{hmac[0] if hmac else '?'} on every page"
    )


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _record(path: Path) -> dict[str, Any] | None:
    """A record another command keeps (the last check, the last backup); a file that
    cannot be read is said to be so, not an error of status."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"unreadable": f"{path}: {exc}"}
    return data if isinstance(data, dict) else {"unreadable": f"{path}: not a JSON object"}
