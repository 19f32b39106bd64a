"""`pfar vault restore`: a backup back in place of a home's vault, with no kernel running.

In this order, and the home is touched only at the last step:
1. the backup is checked: every file against its manifest's sha256, the key against its
   check value, each database opened with it and `quick_check`ed (and
   `cipher_integrity_check`ed when encrypted);
2. the current vault is read: a journal further along than the backup's (a higher
   position), or one that cannot be read, is not replaced without `--force`, and the
   refusal names what would be lost;
3. the backup's files are copied (and, for a backup under a separate backup key,
   exported under the vault's key) into a staging directory in the home, synced and
   checked again;
4. the vault's key is stored where this machine keeps keys, when it came with
   `--key-file`;
5. `vault/` is renamed to `vault.before-restore-<time>/` (pfar never deletes it), the
   staging directory to `vault/`, and the home directory is synced.

The restored vault holds `restored.json`: the backup's manifest, the acknowledged record
the replaced vault had (it moved aside with it: it describes a journal that is no longer
there), and when. The next start reads it to say which tasks are as of the backup and
what was lost since.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import (
    BackupDamaged,
    PfarError,
    RestoreRefused,
    VaultError,
    VaultKeyMissing,
    VaultKeyWrong,
    VaultLocked,
)
from . import durable, keys
from .backup import LAST_BACKUP_NAME
from .driver import sqlite
from .home import Home, HomeLock
from .key_place import check_placeable, checked, held_at, read_key_file, store, this_machines_place
from .keys import KeySource, UnlockInfo, VaultKey
from .manifest import (
    DB_KINDS,
    DB_NAMES,
    JournalFacts,
    Manifest,
    describe_tasks,
    journal_facts,
    read_manifest,
)
from .schema import latest_version, schema_version
from .sqlite import connect

RESTORED_NAME = "restored.json"
ASIDE_PREFIX = "vault.before-restore-"
_STAGING_PREFIX = ".vault.restoring-"
# the acknowledged-work record a start compares the journal with: it describes the
# replaced journal, so it goes aside with it (its contents are kept in restored.json)
WATERMARK_NAMES = ("acknowledged", "acknowledged.json")
_SHOWN_TASKS = 10


@dataclass(frozen=True, slots=True)
class TaskRow:
    task_id: str
    template_id: str
    state: str


@dataclass(frozen=True, slots=True)
class CurrentVault:
    """The vault a restore would replace, as far as it could be read."""

    vault_id: str | None
    facts: JournalFacts | None
    tasks: dict[str, TaskRow]
    unreadable: str | None  # why it could not be read (then facts is None)


@dataclass(frozen=True, slots=True)
class RestoreKeys:
    file_key: VaultKey | None  # opens the backup's databases
    vault_key: VaultKey | None  # the restored vault's key (None: a plain vault)
    unlock: UnlockInfo | None  # the restored vault's unlock.json
    place: KeySource | None  # where the vault key is to be stored (None: it is there)


@dataclass(frozen=True, slots=True)
class Restored:
    manifest: Manifest
    aside: Path | None  # where the replaced vault went
    replaced: CurrentVault | None
    key_stored: str | None  # where the key was stored, when the restore stored it


def restore(
    home: Home,
    src: Path,
    *,
    force: bool = False,
    key_file: Path | None = None,
    backup_key_file: Path | None = None,
) -> Restored:
    src = src.expanduser().absolute()
    lock = HomeLock(home)
    try:
        lock.acquire()
    except VaultLocked:
        raise VaultLocked(
            f"a kernel is running on {home.root}: stop it first (a restore replaces the "
            "vault under it); nothing was changed"
        ) from None
    try:
        return _restore(home, src, force, key_file, backup_key_file)
    finally:
        lock.release()


def _restore(
    home: Home, src: Path, force: bool, key_file: Path | None, backup_key_file: Path | None
) -> Restored:
    manifest = read_manifest(src)
    _check_hashes(src, manifest)
    restore_keys = _plan_keys(src, manifest, key_file, backup_key_file)
    backup_tasks = _check_databases(src, manifest, restore_keys.file_key)
    current = read_current(home)
    now = datetime.now(UTC)
    aside = _aside_name(home, now) if home.vault_dir.exists() else None
    if current is not None and not force:
        _refuse_if_newer(home, manifest, current, backup_tasks, aside)
    if restore_keys.place is not None and restore_keys.vault_key is not None:
        check_placeable(restore_keys.place, restore_keys.vault_key)
    for stale in home.root.glob(f"{_STAGING_PREFIX}*"):  # an interrupted restore's
        shutil.rmtree(stale, ignore_errors=True)
    staging = home.root / f"{_STAGING_PREFIX}{now:%Y%m%dT%H%M%S}-{os.getpid()}"
    staging.mkdir(mode=0o700)
    try:
        _stage(src, manifest, restore_keys, staging)
        durable.write_json(
            staging / LAST_BACKUP_NAME,
            {"at": manifest.made_at, "dest": str(src), "position": manifest.position},
        )
        durable.write_json(
            staging / RESTORED_NAME,
            {
                "backup": manifest.to_json(),
                "previous": _watermark(home),
                "restored_at": now.isoformat(timespec="seconds"),
                "source": str(src),
                "moved_aside": str(aside) if aside else None,
                "replaced": _replaced_json(current),
            },
        )
        durable.fsync_dir(staging)
        stored = None
        if restore_keys.place is not None and restore_keys.vault_key is not None:
            if store(home, restore_keys.place, restore_keys.vault_key):
                stored = restore_keys.place.describe()
        if aside is not None:
            os.rename(home.vault_dir, aside)
        os.rename(staging, home.vault_dir)
        durable.fsync_dir(home.root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    keys.forget(home)
    return Restored(manifest, aside, current, stored)


# -- checking the backup -------------------------------------------------------------


def _check_hashes(src: Path, manifest: Manifest) -> None:
    for name, entry in manifest.files.items():
        path = src / name
        try:
            digest = durable.sha256_of(path)
        except FileNotFoundError:
            raise BackupDamaged(
                f"{path} is missing (the backup's manifest lists it); nothing was restored"
            ) from None
        except OSError as exc:
            raise BackupDamaged(f"{path} cannot be read ({exc}); nothing was restored") from None
        if digest != entry.sha256:
            raise BackupDamaged(
                f"{path} is not the file the backup made (its sha256 differs from the "
                "manifest's): it was damaged or changed since. Nothing was restored; "
                "restore from another backup"
            )


def _plan_keys(
    src: Path, manifest: Manifest, key_file: Path | None, backup_key_file: Path | None
) -> RestoreKeys:
    info = None
    if "unlock.json" in manifest.files:
        info = keys.read_unlock(src)
    if manifest.encryption == "none":
        if key_file is not None or backup_key_file is not None:
            raise VaultError(
                f"{src} is the backup of a plain vault, not encrypted: it takes no key"
            )
        return RestoreKeys(None, None, None, None)
    if manifest.encryption == "vault-key":
        if backup_key_file is not None:
            raise VaultError(
                f"{src} is encrypted with the vault's key, not a separate backup key: give "
                "the vault's key with --key-file (or nothing, where this machine has it)"
            )
        if info is None:
            raise BackupDamaged(f"{src} has no unlock.json for its encrypted files")
        key, new_info, place = _vault_key(src, info, key_file)
        return RestoreKeys(key, key, new_info, place)
    if backup_key_file is None:
        raise VaultKeyMissing(
            f"{src} is encrypted with a separate backup key (its manifest says so): give "
            "it with --backup-key-file FILE"
        )
    backup_key = read_key_file(backup_key_file)
    if backup_key.check(manifest.backup_id) != manifest.backup_key_check:
        raise VaultKeyWrong(
            f"{backup_key_file} is not the backup key of {src} (its check value differs); "
            "nothing was restored"
        )
    if info is None:  # a plain vault's backup, encrypted apart: restored plain
        if key_file is not None:
            raise VaultError(f"{src} is the backup of a plain vault: --key-file has no use")
        return RestoreKeys(backup_key, None, None, None)
    key, new_info, place = _vault_key(src, info, key_file)
    return RestoreKeys(backup_key, key, new_info, place)


def _vault_key(
    src: Path, info: UnlockInfo, key_file: Path | None
) -> tuple[VaultKey, UnlockInfo, KeySource | None]:
    """The backed-up vault's key, the unlock.json to restore, and where the key is to be
    stored (None: where unlock.json says, it is already)."""
    if key_file is None:
        try:
            return keys.load_key(info), info, None
        except (VaultKeyMissing, VaultKeyWrong) as exc:
            raise type(exc)(
                f"{exc} (for the backup {src}). On another machine, give the vault's key "
                "with --key-file FILE: the file `pfar vault key export` wrote"
            ) from None
    key = checked(read_key_file(key_file), info, key_file.expanduser().absolute())
    with contextlib.suppress(PfarError):
        if held_at(info.source) == key:  # this machine keeps it where unlock.json says
            return key, info, None
    place = this_machines_place(info.vault_id)
    return key, dataclasses.replace(info, source=place), place


def _check_databases(src: Path, manifest: Manifest, key: VaultKey | None) -> dict[str, TaskRow]:
    """Open each database of the backup with its key and check it; return the tasks."""
    tasks: dict[str, TaskRow] = {}
    for name in [n for n in DB_NAMES if n in manifest.files]:
        path = src / name
        kind = DB_KINDS[name]
        try:
            conn = connect(path, key=key, readonly=True)
        except VaultError as exc:
            raise BackupDamaged(
                f"{path} cannot be opened with its key, which is the right one: the file is "
                f"damaged ({exc}). Nothing was restored"
            ) from None
        try:
            _check_integrity(conn, path, key is not None)
            version = schema_version(conn)
            if version != manifest.schema.get(name):
                raise BackupDamaged(f"{path}: schema version {version} is not the manifest's")
            if version > latest_version(kind):
                raise VaultError(
                    f"{path} was made by a newer pfar (schema version {version}; this pfar "
                    f"knows {latest_version(kind)}): upgrade pfar, then restore. Nothing "
                    "was restored"
                )
            if kind == "sessions":
                facts = journal_facts(conn)
                if (facts.position, facts.tasks) != (manifest.position, manifest.tasks):
                    raise BackupDamaged(
                        f"{path} does not hold what its manifest says (position "
                        f"{facts.position}, {describe_tasks(facts.tasks)}); nothing was "
                        "restored"
                    )
                tasks = _task_rows(conn)
        except sqlite.Error as exc:
            raise BackupDamaged(f"{path} is damaged ({exc}); nothing was restored") from None
        finally:
            conn.close()
    return tasks


def _check_integrity(conn: sqlite.Connection, path: Path, encrypted: bool) -> None:
    problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    if problems != ["ok"]:
        raise BackupDamaged(
            f"{path} failed SQLite's quick_check ({'; '.join(problems[:3])}); nothing was restored"
        )
    if encrypted:
        bad = [str(r[0]) for r in conn.execute("PRAGMA cipher_integrity_check").fetchall()]
        if bad:
            raise BackupDamaged(
                f"{path} failed SQLCipher's page check ({'; '.join(bad[:3])}); nothing was restored"
            )


def _task_rows(conn: sqlite.Connection) -> dict[str, TaskRow]:
    return {
        str(r[0]): TaskRow(str(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute("SELECT task_id, template_id, state FROM task_journal")
    }


# -- the vault it would replace ------------------------------------------------------


def read_current(home: Home) -> CurrentVault | None:
    """The home's vault as it is now, or None when there is none."""
    vault = home.vault_dir
    if not vault.is_dir() or not any(vault.iterdir()):
        return None
    vault_id = None
    try:
        info = keys.read_unlock(vault)
        vault_id = info.vault_id if info is not None else None
        if not home.sessions_db.exists():
            raise VaultError(f"{vault} holds files but no sessions.db")
        # a reader of a WAL database makes its -wal and -shm files when they are not
        # there: those it made go again, so that a refusal leaves the vault as it was
        # (no other process has them open: the restore holds the home's lock)
        db = home.sessions_db
        side = [Path(f"{db}-wal"), Path(f"{db}-shm")]
        made = [p for p in side if not p.exists()]
        try:
            conn = connect(db, key=keys.unlock(home), readonly=True)
            try:
                return CurrentVault(vault_id, journal_facts(conn), _task_rows(conn), None)
            finally:
                conn.close()
        finally:
            for path in made:
                with contextlib.suppress(FileNotFoundError):
                    if path.name.endswith("-shm") or path.stat().st_size == 0:
                        path.unlink()
    except (PfarError, sqlite.Error, OSError) as exc:
        return CurrentVault(vault_id, None, {}, str(exc))


def _refuse_if_newer(
    home: Home,
    manifest: Manifest,
    current: CurrentVault,
    backup_tasks: dict[str, TaskRow],
    aside: Path | None,
) -> None:
    keep = (
        f"Nothing was changed. To restore anyway, add --force: the current vault is then "
        f"moved to {aside or home.vault_dir} (pfar never deletes it)"
    )
    if current.facts is None:
        raise RestoreRefused(
            f"the vault in {home.vault_dir} cannot be read ({current.unreadable}), so pfar "
            f"cannot tell whether it is newer than the backup. {keep}"
        )
    facts = current.facts
    if facts.position > manifest.position:
        raise RestoreRefused(
            f"the vault in {home.vault_dir} is newer than the backup: its journal is at "
            f"position {facts.position}, the backup's at {manifest.position} (made "
            f"{manifest.made_at}). {lost(current, manifest, backup_tasks)} {keep}; or back it up "
            "first with `pfar vault backup DEST`"
        )
    if current.vault_id != manifest.vault_id and facts.task_total:
        raise RestoreRefused(
            f"the backup is of another vault (vault {manifest.vault_id or 'plain'}; this "
            f"home's is {current.vault_id or 'plain'}), and the vault in {home.vault_dir} "
            f"holds {facts.task_total} task(s) ({describe_tasks(facts.tasks)}). {keep}"
        )


def lost(current: CurrentVault, manifest: Manifest, backup_tasks: dict[str, TaskRow]) -> str:
    """What replacing `current` with the backup loses, in words."""
    assert current.facts is not None
    new = [t for t in current.tasks.values() if t.task_id not in backup_tasks]
    moved = [
        t
        for t in current.tasks.values()
        if t.task_id in backup_tasks and backup_tasks[t.task_id].state != t.state
    ]
    words = [
        f"Restoring would lose {current.facts.position - manifest.position} journal event(s); "
        f"tasks now: {describe_tasks(current.facts.tasks)}, in the backup: "
        f"{describe_tasks(manifest.tasks)}"
    ]
    if new:
        shown = ", ".join(
            f"{t.task_id[:8]} ({t.template_id}, {t.state})" for t in new[:_SHOWN_TASKS]
        )
        more = f" and {len(new) - _SHOWN_TASKS} more" if len(new) > _SHOWN_TASKS else ""
        words.append(f"{len(new)} task(s) the backup does not have: {shown}{more}")
    if moved:
        shown = ", ".join(
            f"{t.task_id[:8]} ({backup_tasks[t.task_id].state} in the backup, {t.state} now)"
            for t in moved[:_SHOWN_TASKS]
        )
        more = f" and {len(moved) - _SHOWN_TASKS} more" if len(moved) > _SHOWN_TASKS else ""
        words.append(f"{len(moved)} task(s) that moved on since: {shown}{more}")
    return "; ".join(words) + "."


def _replaced_json(current: CurrentVault | None) -> dict[str, Any] | None:
    if current is None:
        return None
    return {
        "vault_id": current.vault_id,
        "position": current.facts.position if current.facts else None,
        "tasks": current.facts.tasks if current.facts else None,
        "unreadable": current.unreadable,
    }


def _watermark(home: Home) -> Any:
    """The replaced vault's acknowledged record, parsed (its text if it is not JSON)."""
    for name in WATERMARK_NAMES:
        path = home.vault_dir / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            continue
        try:
            return json.loads(text)
        except ValueError:
            return text
    return None


def _aside_name(home: Home, now: datetime) -> Path:
    base = home.root / f"{ASIDE_PREFIX}{now:%Y%m%dT%H%M%SZ}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


# -- putting the files in place ------------------------------------------------------


def _stage(src: Path, manifest: Manifest, restore_keys: RestoreKeys, staging: Path) -> None:
    """The backup's databases in `staging`, under the vault's key, synced and checked."""
    vault_key = restore_keys.vault_key
    for name in [n for n in DB_NAMES if n in manifest.files]:
        target = staging / name
        if manifest.encryption == "backup-key":
            copy = staging / f".{name}.backup"
            _copy_checked(src / name, copy, manifest)
            assert restore_keys.file_key is not None
            conn = connect(copy, key=restore_keys.file_key)
            try:
                into = f"KEY {vault_key.pragma()}" if vault_key is not None else "KEY ''"
                conn.execute(f"ATTACH DATABASE ? AS restored {into}", (str(target),))
                conn.execute("SELECT sqlcipher_export('restored')")
                conn.execute("DETACH DATABASE restored")
            finally:
                conn.close()
            for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
                leftover.unlink(missing_ok=True)
            os.chmod(target, 0o600)
        else:
            _copy_checked(src / name, target, manifest)
        conn = connect(target, key=vault_key, readonly=True)
        try:
            _check_integrity(conn, target, vault_key is not None)
        finally:
            conn.close()
        durable.fsync_file(target)
    if restore_keys.unlock is not None:
        keys.write_unlock(staging, restore_keys.unlock)


def _copy_checked(source: Path, target: Path, manifest: Manifest) -> None:
    if durable.copy_synced(source, target) != manifest.files[source.name].sha256:
        raise BackupDamaged(
            f"{source} changed while it was restored (its sha256 differs from the "
            "manifest's now); nothing was restored"
        )
