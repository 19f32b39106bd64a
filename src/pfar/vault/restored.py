"""`vault/restored.json`: what `pfar vault restore` leaves for the next start to tell.

The restore puts a backup's files in place, removes `vault/acknowledged` (the record of
a journal that is no longer there) and writes this file:

    {"backup": {"made_at": ..., "position": ..., "tasks": ...},   # the backup's manifest
     "previous": {...} | null,   # vault/acknowledged as it was before the restore
     "restored_at": ...}

The next start says in its recovery report that the vault was restored, from which
backup, and what was lost since (the previous record's position against the
backup's), then removes the file once that report is journaled. This module reads it.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .acknowledged import Acknowledged

NAME = "restored.json"


@dataclass(frozen=True, slots=True)
class Restored:
    path: Path
    made_at: str  # when the backup was made
    restored_at: str
    position: int | None  # the backup's journal position, when its manifest says it
    tasks: int | None  # the tasks the backup holds, when its manifest says it
    previous: Acknowledged | None  # what the vault had acknowledged before the restore
    problem: str | None = None  # what could not be read of the file, if anything

    @property
    def lost(self) -> tuple[int, int] | None:
        """The journal positions acknowledged before the restore that the backup lacks
        (first, last), or None when none were (or it cannot be told)."""
        if self.previous is None or self.position is None:
            return None
        if self.previous.position <= self.position:
            return None
        return self.position + 1, self.previous.position


def path_of(vault_dir: Path) -> Path:
    return vault_dir / NAME


def read(vault_dir: Path) -> Restored | None:
    """The restore to report, or None when there was none. A file that cannot be read
    whole is still a restore: what could be read is told, with the problem."""
    path = path_of(vault_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return Restored(path, "", "", None, None, None, f"cannot be read ({exc})")
    try:
        value = json.loads(text)
    except ValueError as exc:
        return Restored(path, "", "", None, None, None, f"is not JSON ({exc})")
    if not isinstance(value, dict):
        return Restored(path, "", "", None, None, None, "is not a JSON object")
    backup = value.get("backup")
    backup = backup if isinstance(backup, dict) else {}
    problems = []
    previous = None
    if value.get("previous") is not None:
        try:
            previous = Acknowledged.from_json(value["previous"])
        except ValueError as exc:
            problems.append(f"previous: {exc}")
    return Restored(
        path,
        str(backup.get("made_at") or ""),
        str(value.get("restored_at") or ""),
        _count(backup.get("position")),
        _tasks(backup.get("tasks")),
        previous,
        "; ".join(problems) or None,
    )


def remove(restored: Restored) -> None:
    """Done telling: the file goes (a later start has nothing to report)."""
    with contextlib.suppress(FileNotFoundError):
        restored.path.unlink()


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _tasks(value: Any) -> int | None:
    """A manifest's tasks: a count, or the list of them."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return _count(value.get("total", sum(v for v in value.values() if isinstance(v, int))))
    return _count(value)
