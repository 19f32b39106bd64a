"""Checking a backup before it is restored: every file against its manifest's sha256,
each database opened with its key, `quick_check`ed (and `cipher_integrity_check`ed when
encrypted), its schema and journal as the manifest says."""

from __future__ import annotations

from pathlib import Path

from ..errors import BackupDamaged, VaultError
from . import durable
from .driver import sqlite
from .keys import VaultKey
from .manifest import DB_KINDS, DB_NAMES, Manifest, describe_tasks, journal_facts
from .restore_replaced import TaskRow, task_rows
from .schema import latest_version, schema_version
from .sqlite import connect


def check_hashes(src: Path, manifest: Manifest) -> None:
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


def check_databases(src: Path, manifest: Manifest, key: VaultKey | None) -> dict[str, TaskRow]:
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
            check_integrity(conn, path, key is not None)
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
                tasks = task_rows(conn)
        except sqlite.Error as exc:
            raise BackupDamaged(f"{path} is damaged ({exc}); nothing was restored") from None
        finally:
            conn.close()
    return tasks


def check_integrity(conn: sqlite.Connection, path: Path, encrypted: bool) -> None:
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
