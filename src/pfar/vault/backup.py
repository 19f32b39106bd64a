"""`pfar vault backup`: a consistent copy of the vault, made while a kernel runs.

The copy goes through SQLite's online backup API on connections of its own: in WAL
mode a reader never blocks the kernel's writer, and a backup step that copies every
page at once reads one snapshot (a commit made meanwhile is in the next backup, not
half in this one). The three databases are read under read transactions opened one
after the other before any copying, so they are as close to one moment as three
files can be; each is whole.

Encryption: a backup of an encrypted vault is encrypted with the vault's key (the
backup API's target is keyed like its source), or, with a separate backup key, the
copy made with the vault key is exported into a file keyed with the backup key
(`sqlcipher_export`, SQLCipher's documented way to re-key into a new file; the
intermediate copy is encrypted and deleted). A plain vault gives a plain backup, unless
a backup key is given.

Everything is written into a temporary directory beside DEST, synced, and renamed to
DEST, which must not exist: a backup never overwrites anything, and a DEST that
exists is a complete backup.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..errors import VaultCorrupt, VaultError, VaultKeyWrong
from . import durable
from .driver import sqlite
from .home import Home
from .keys import UnlockInfo, VaultKey, unlock_path
from .manifest import (
    DB_KINDS,
    DB_NAMES,
    MANIFEST_NAME,
    Encryption,
    FileEntry,
    JournalFacts,
    Manifest,
    journal_facts,
)
from .schema import schema_version
from .sqlite import connect

LAST_BACKUP_NAME = "last-backup.json"
_PARTIAL = ".partial-"


@dataclass(frozen=True, slots=True)
class BackupKey:
    """A separate key for a backup, and the file it came from (for messages)."""

    key: VaultKey
    path: Path


def pfar_version() -> str:
    try:
        return version("pfar")
    except PackageNotFoundError:
        return "0+unknown"


def make_backup(
    home: Home,
    dest: Path,
    *,
    key: VaultKey | None,
    backup_key: BackupKey | None = None,
) -> Manifest:
    """Back `home`'s vault up into the new directory `dest`; return its manifest.

    `key` is the vault's key (None: a plain vault), as `keys.unlock(home)` gives it."""
    dest = dest.expanduser().absolute()
    _check_dest(home, dest)
    # read once, and the same bytes go into the backup: an unlock.json replaced meanwhile
    # (a rekey begun after the snapshots) never goes with files under another key
    unlock_raw, info = _unlock_of(home)
    if (info is None) != (key is None):
        raise VaultError(
            f"{home.vault_dir} is {'plain' if info is None else 'encrypted'}, but the backup "
            "was asked for the other kind; nothing was written"
        )
    if info is not None and key is not None and key.check(info.vault_id) != info.check:
        raise VaultKeyWrong(
            f"the key given for {home.vault_dir} is not its key (vault {info.vault_id}; "
            "unlock.json changed since it was read?); nothing was written"
        )
    if not home.sessions_db.exists():
        if home.secrets_db.exists():  # a home whose journal is on a server
            raise VaultError(
                f"{home.root} keeps its journal on a PostgreSQL server ([vault] backend in "
                "config.toml): back the journal up with the server's own tools (pg_dump, "
                "base backups); `pfar vault backup` copies a vault whose journal is "
                "sessions.db, and does not copy half a home. Nothing was written"
            )
        raise VaultError(f"{home.sessions_db} does not exist: there is no vault to back up")
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}{_PARTIAL}", dir=dest.parent))
    try:
        backup_id = uuid.uuid4().hex
        encryption: Encryption = (
            "backup-key" if backup_key else "vault-key" if key is not None else "none"
        )
        file_key = backup_key.key if backup_key else key
        names = [n for n in DB_NAMES if (home.vault_dir / n).exists()]
        with _snapshots(home, names, key) as sources:
            # the moment the copies are of: their snapshots are taken
            made_at = datetime.now(UTC).isoformat(timespec="seconds")
            for name, source in sources.items():
                _copy(source, tmp / name, key, backup_key.key if backup_key else None)
        schema, facts = _read_back(tmp, names, file_key)
        if unlock_raw is not None:
            _write_new(tmp / "unlock.json", unlock_raw)
        files = {
            name: FileEntry(durable.sha256_of(tmp / name), (tmp / name).stat().st_size)
            for name in [*names, *(["unlock.json"] if info is not None else [])]
        }
        manifest = Manifest(
            backup_id=backup_id,
            pfar_version=pfar_version(),
            made_at=made_at,
            vault_id=info.vault_id if info is not None else None,
            encryption=encryption,
            backup_key_check=backup_key.key.check(backup_id) if backup_key else None,
            position=facts.position,
            tasks=facts.tasks,
            schema=schema,
            files=files,
            home=str(home.root),
        )
        for name in files:
            durable.fsync_file(tmp / name)
        durable.write_json(tmp / MANIFEST_NAME, manifest.to_json())
        durable.fsync_dir(tmp)
        if dest.exists():  # made meanwhile by someone else: theirs, left as it is
            raise VaultError(f"{dest} exists; a backup never overwrites anything")
        os.rename(tmp, dest)
        durable.fsync_dir(dest.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    record_last_backup(home, manifest, dest)
    return manifest


def record_last_backup(home: Home, manifest: Manifest, dest: Path) -> None:
    """`vault/last-backup.json`, read by `pfar vault status`."""
    durable.write_json(
        home.vault_dir / LAST_BACKUP_NAME,
        {"at": manifest.made_at, "dest": str(dest), "position": manifest.position},
    )


def _unlock_of(home: Home) -> tuple[bytes | None, UnlockInfo | None]:
    path = unlock_path(home.vault_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise VaultError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise VaultCorrupt(f"{path} is not JSON ({exc}); nothing was backed up") from None
    return raw, UnlockInfo.parse(data, path)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_dest(home: Home, dest: Path) -> None:
    if dest.exists() or dest.is_symlink():
        raise VaultError(
            f"{dest} exists; a backup goes into a new directory and never overwrites "
            "anything. Choose another name"
        )
    if dest.is_relative_to(home.vault_dir.absolute()):
        raise VaultError(
            f"{dest} is inside the vault directory {home.vault_dir}; choose a place outside it"
        )


@contextlib.contextmanager
def _snapshots(
    home: Home, names: list[str], key: VaultKey | None
) -> Iterator[dict[str, sqlite.Connection]]:
    """Read-only connections to the vault's databases, each in a read transaction (its
    snapshot) begun before any copying starts."""
    conns: dict[str, sqlite.Connection] = {}
    try:
        for name in names:
            conns[name] = connect(home.vault_dir / name, key=key, readonly=True)
        for conn in conns.values():
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        yield conns
    finally:
        for conn in conns.values():
            with contextlib.suppress(sqlite.Error):
                conn.execute("ROLLBACK")
            conn.close()


def _copy(
    source: sqlite.Connection, target: Path, key: VaultKey | None, backup_key: VaultKey | None
) -> None:
    """Copy `source`'s snapshot into the new file `target`, keyed with `backup_key` when
    given, else like the vault."""
    if backup_key is None:
        _backup_api(source, target, key)
        return
    # SQLCipher's backup API copies between databases keyed alike; a file under another
    # key (or an encrypted copy of a plain vault) is made by exporting a copy into it
    stage = target.with_name(f".{target.name}.stage")
    try:
        _backup_api(source, stage, key)
        conn = connect(stage, key=key)
        try:
            conn.execute(f"ATTACH DATABASE ? AS backup KEY {backup_key.pragma()}", (str(target),))
            conn.execute("SELECT sqlcipher_export('backup')")
            conn.execute("DETACH DATABASE backup")
        finally:
            conn.close()
        os.chmod(target, 0o600)
    finally:
        for leftover in (stage, Path(f"{stage}-wal"), Path(f"{stage}-shm")):
            leftover.unlink(missing_ok=True)


def _backup_api(source: sqlite.Connection, target: Path, key: VaultKey | None) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    conn = sqlite.connect(str(target), isolation_level=None)
    try:
        if key is not None:
            conn.execute(f"PRAGMA key = {key.pragma()}")
        source.backup(conn)  # every page in one step: one snapshot
        # a rollback journal: the backup is one self-contained file, read without a -wal
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()
    finally:
        conn.close()


def _read_back(
    tmp: Path, names: list[str], key: VaultKey | None
) -> tuple[dict[str, int], JournalFacts]:
    """Read each copy back with the key it is under: its schema version, the journal's
    position and tasks, and a quick_check (a copy that cannot be read is no backup)."""
    schema: dict[str, int] = {}
    facts = None
    for name in names:
        conn = connect(tmp / name, key=key, readonly=True)
        try:
            problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise VaultError(
                    f"the copy of {name} failed its check ({'; '.join(problems[:3])}); "
                    "the backup was not kept. The vault itself may be damaged: see docs/vault.md"
                )
            schema[name] = schema_version(conn)
            if DB_KINDS[name] == "sessions":
                facts = journal_facts(conn)
        finally:
            conn.close()
    assert facts is not None, "sessions.db is always backed up"
    return schema, facts
