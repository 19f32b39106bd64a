"""Ordered schema migrations, one transaction each, version kept in `schema_version`.

Files are `migrations/<kind>_<NNNN>_<name>.sql`; they are applied in number
order and never edited once released: a change is a new file. A data upgrade that
SQL cannot write clearly runs in its file's transaction (upgrades.py).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import MigrationFailed, VaultCorrupt
from .driver import sqlite
from .upgrades import AFTER


def _migrations(kind: str) -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    for entry in resources.files("pfar.vault").joinpath("migrations").iterdir():
        name = entry.name
        if not (name.startswith(f"{kind}_") and name.endswith(".sql")):
            continue
        number = int(name.split("_")[1])
        found.append((number, name, entry.read_text(encoding="utf-8")))
    found.sort()
    return found


def latest_version(kind: str) -> int:
    """The newest schema version this pfar knows for `kind` (0: none)."""
    steps = _migrations(kind)
    return steps[-1][0] if steps else 0


def schema_version(conn: sqlite.Connection) -> int:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'"
    ).fetchone()
    if row is None:
        return 0
    version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    return int(version or 0)


def migrate(conn: sqlite.Connection, kind: str, path: Path) -> int:
    """Bring `conn` to the newest schema for `kind`; return the version reached."""
    steps = _migrations(kind)
    latest = steps[-1][0] if steps else 0
    current = schema_version(conn)
    if current > latest:
        raise VaultCorrupt(
            f"{path}: schema version {current} is newer than this pfar knows ({latest}); "
            "upgrade pfar instead of opening it with an older one"
        )
    for number, name, sql in steps:
        if number <= current:
            continue
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _split(sql):
                conn.execute(statement)
            if name in AFTER:
                AFTER[name](conn)
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) "
                "VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                (number, name),
            )
            conn.execute("COMMIT")
        except sqlite.Error as exc:
            conn.execute("ROLLBACK")
            raise MigrationFailed(f"{path}: migration {name} failed: {exc}") from None
        current = number
    return current


def _split(sql: str) -> list[str]:
    """Split a migration file into statements (no triggers, so `;` ends a statement)."""
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
