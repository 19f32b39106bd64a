"""The vault a restore would replace: read as far as it can be, refused without `--force`
when it is further along than the backup (saying what would be lost), and described in
restored.json once it is moved aside."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import PfarError, RestoreRefused, VaultError
from . import keys
from .driver import sqlite
from .home import Home
from .manifest import JournalFacts, Manifest, describe_tasks, journal_facts
from .sqlite import connect

ASIDE_PREFIX = "vault.before-restore-"
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


def task_rows(conn: sqlite.Connection) -> dict[str, TaskRow]:
    return {
        str(r[0]): TaskRow(str(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute("SELECT task_id, template_id, state FROM task_journal")
    }


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
                return CurrentVault(vault_id, journal_facts(conn), task_rows(conn), None)
            finally:
                conn.close()
        finally:
            for path in made:
                with contextlib.suppress(FileNotFoundError):
                    if path.name.endswith("-shm") or path.stat().st_size == 0:
                        path.unlink()
    except (PfarError, sqlite.Error, OSError) as exc:
        return CurrentVault(vault_id, None, {}, str(exc))


def refuse_if_newer(
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


def replaced_json(current: CurrentVault | None) -> dict[str, Any] | None:
    if current is None:
        return None
    return {
        "vault_id": current.vault_id,
        "position": current.facts.position if current.facts else None,
        "tasks": current.facts.tasks if current.facts else None,
        "unreadable": current.unreadable,
    }


def watermark(home: Home) -> Any:
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


def aside_name(home: Home, now: datetime) -> Path:
    base = home.root / f"{ASIDE_PREFIX}{now:%Y%m%dT%H%M%SZ}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path
