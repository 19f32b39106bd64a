"""`pfar init --postgres DSN`: a home whose journal lives on a PostgreSQL server.

The local vault keeps secrets and learnings (encrypted, as in every home); the server
gets the journal's tables. The server's password is never in argv or config.toml: it
is libpq's own (PGPASSWORD, ~/.pgpass), an environment variable the configuration
names, or a secret kept in the new vault.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field

from ..config import dsn_has_password
from ..errors import BadRequest, VaultError
from ..journal.postgres.schema import schema_version
from ..journal.postgres.store import connect, describe, open_journal
from ..vault.home import Home
from ..vault.keys import VaultKey
from ..vault.secrets import SecretStore


@dataclass(frozen=True, slots=True)
class PostgresInit:
    dsn: str
    # where the password is kept: the name of an environment variable, or of a secret
    # the new vault keeps (`password` is then its value, read from the owner)
    password_env: str | None = None
    password_secret: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        try:
            has_password = dsn_has_password(self.dsn)
        except ValueError as exc:
            raise BadRequest("--postgres", str(exc)) from None
        if has_password:
            raise BadRequest(
                "--postgres",
                "the DSN holds a password, which argv would show to every user of this "
                "machine: give it without one, and the password with PGPASSWORD, "
                "--password-env or --password-secret",
            )

    def config_toml(self) -> str:
        """The `[vault.postgresql]` table config.toml gets."""
        lines = ["[vault.postgresql]", f"dsn = {json.dumps(self.dsn)}"]
        if self.password_env is not None:
            lines.append(f"password_env = {json.dumps(self.password_env)}")
        if self.password_secret is not None:
            lines.append(f"password_secret = {json.dumps(self.password_secret)}")
        return "\n".join(lines) + "\n"


def with_postgres(config_text: str, pg: PostgresInit) -> str:
    """The default config.toml, its journal on the server."""
    head, marker, tail = config_text.partition("[vault]\n")
    if not marker:
        raise AssertionError("the default config.toml has a [vault] table")
    vault, rest_marker, rest = tail.partition("\n[")
    return (
        f'{head}[vault]\nbackend = "postgresql"\n{vault.rstrip()}\n\n'
        f"{pg.config_toml()}{rest_marker}{rest}"
    )


def create_journal(home: Home, pg: PostgresInit, key: VaultKey | None) -> None:
    """Keep the password where asked, then create the journal's tables on the server;
    refuse a server database that already holds a pfar journal (another home's)."""
    if pg.password_secret is not None:
        assert pg.password is not None
        secrets = SecretStore.open(home.secrets_db, key=key)
        try:
            secrets.set(pg.password_secret, pg.password, service="postgresql")
        finally:
            secrets.close()
    asyncio.run(_create(home, pg))


async def _create(home: Home, pg: PostgresInit) -> None:
    where = describe(pg.dsn)
    password = _password(pg)
    conn = await connect(pg.dsn, where, password)
    try:
        found = await schema_version(conn, where)
    finally:
        await conn.close()
    if found is not None:
        raise VaultError(
            f"{where} already holds a pfar journal (schema version {found}), another "
            "home's: one kernel writes a journal; nothing was changed. Give another "
            "database (or a schema, with options=-csearch_path=NAME in the DSN)"
        )
    journal = await open_journal(pg.dsn, create=True, password=password)
    await journal.aclose()


def _password(pg: PostgresInit) -> str | None:
    if pg.password is not None:
        return pg.password
    if pg.password_env is not None:
        value = os.environ.get(pg.password_env)
        if not value:
            raise BadRequest(
                "--password-env", f"the environment variable {pg.password_env} is not set"
            )
        return value
    return None
