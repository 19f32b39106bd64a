"""The journal's tables on PostgreSQL: created by `pfar init --postgres`, migrated at start.

Migrations are `migrations/NNNN_<name>.sql`, numbered as SQLite's sessions migrations
are (PostgreSQL's first, 0013, creates schema 13 whole). Every pending one is applied
in one transaction, under an advisory lock so two kernels starting at once migrate
once; a database newer than this pfar is refused, naming both versions.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import psycopg
from psycopg import AsyncConnection

from ...errors import MigrationFailed, StoreUnavailable, VaultCorrupt, VaultMissing
from ..records import now_rfc3339

# pg_advisory_xact_lock's key for pfar's migrations ("pfar" in ASCII)
_MIGRATION_LOCK = 0x70666172


def migrations() -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    for entry in resources.files("pfar.journal.postgres").joinpath("migrations").iterdir():
        if entry.name.endswith(".sql"):
            number = int(entry.name.split("_")[0])
            found.append((number, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def latest_version() -> int:
    return migrations()[-1][0]


async def schema_version(conn: AsyncConnection[Any], where: str) -> int | None:
    """The journal's schema version, None when the database has no pfar journal."""
    try:
        return await _schema_version(conn)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot read the journal's schema on {where}: {exc}") from None


async def _schema_version(conn: AsyncConnection[Any]) -> int | None:
    cur = await conn.execute(
        "SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('task_journal') IS NOT NULL"
    )
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    if not row[1]:
        raise VaultCorrupt(
            "the database holds a schema_version table but no pfar journal (another "
            "application's?); nothing was changed. Give pfar a database or schema of its own"
        )
    cur = await conn.execute("SELECT max(version) FROM schema_version")
    found = await cur.fetchone()
    return int(found[0] or 0) if found else 0


async def migrate(conn: AsyncConnection[Any], where: str, *, create: bool) -> int:
    """Bring the journal on `conn` (autocommit) to this pfar's schema; the version reached."""
    steps = migrations()
    latest = steps[-1][0]
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        current = await schema_version(conn, where)
        if current is None and not create:
            raise VaultMissing(
                f"{where} has no pfar journal; `pfar init --postgres DSN` creates one"
            )
        current = current or 0
        if current > latest:
            raise VaultCorrupt(
                f"the journal on {where} is at schema version {current}, newer than this "
                f"pfar knows ({latest}); upgrade pfar instead of opening it with an older one"
            )
        if current and current < steps[0][0]:
            raise VaultCorrupt(
                f"the journal on {where} is at schema version {current}, older than any "
                f"PostgreSQL journal this pfar can migrate ({steps[0][0]})"
            )
        for number, name, sql in steps:
            if number <= current:
                continue
            try:
                async with conn.transaction():  # a savepoint: the failure names its file
                    await conn.execute(sql.encode())
                    await conn.execute(
                        "INSERT INTO schema_version(version, name, applied_at) VALUES (%s, %s, %s)",
                        (number, name, now_rfc3339()),
                    )
            except Exception as exc:
                raise MigrationFailed(f"{where}: migration {name} failed: {exc}") from exc
            current = number
    return current
