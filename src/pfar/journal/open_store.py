"""One way to open a home's journal, whichever backend its configuration names."""

from __future__ import annotations

import os

from ..config import VaultConfig
from ..errors import ConfigError
from ..vault.home import Home
from ..vault.keys import VaultKey
from ..vault.secrets import SecretStore
from .faults import FaultHook
from .store import Store


async def open_store(
    home: Home,
    config: VaultConfig,
    *,
    key: VaultKey | None,
    secrets: SecretStore | None = None,
    fault_hook: FaultHook | None = None,
    create: bool = False,
    readonly: bool = False,
) -> Store:
    """The journal `config` names: the vault's sessions.db, or a PostgreSQL server (its
    password from the vault's `secrets` or the environment, as the configuration says)."""
    if config.backend == "sqlite":
        from .sqlite import open_journal, open_readonly

        if readonly:
            return open_readonly(home.sessions_db, key=key)
        return open_journal(
            home.sessions_db,
            key=key,
            create=create,
            synchronous=config.synchronous,
            fault_hook=fault_hook,
        )
    from .postgres.store import open_journal as open_server  # psycopg: loaded when used

    pg = config.postgresql
    assert pg is not None  # VaultConfig refuses postgresql without it
    return await open_server(
        pg.dsn,
        create=create,
        readonly=readonly,
        fault_hook=fault_hook,
        password=password(home, config, secrets),
    )


async def open_home_journal(home: Home, *, readonly: bool = True) -> Store:
    """The home's journal as its config.toml places it, to look at (no kernel needed):
    the vault's key unlocked, and the server's password read from the vault when the
    configuration keeps it there."""
    from ..config import Config
    from ..vault import keys

    config = Config.load(home.config).vault
    key = keys.unlock(home)
    if config.backend == "sqlite" or config.postgresql is None:
        return await open_store(home, config, key=key, readonly=readonly)
    secrets = None
    if config.postgresql.password_secret is not None:
        secrets = SecretStore.open(home.secrets_db, key=key, readonly=True)
    try:
        return await open_store(home, config, key=key, secrets=secrets, readonly=readonly)
    finally:
        if secrets is not None:
            secrets.close()


def backend_of(home: Home) -> str:
    """Where the home's journal is ("sqlite" or "postgresql"). A home with a journal in
    its vault is a SQLite one, whatever else its config says: looking at it reads no
    configuration (one others can write is refused only where it would be acted on)."""
    if home.sessions_db.exists():
        return "sqlite"
    from ..config import Config

    return Config.load(home.config).vault.backend


def password(home: Home, config: VaultConfig, secrets: SecretStore | None) -> str | None:
    """The server's password from where `[vault.postgresql]` says it is kept (None:
    libpq's own sources, PGPASSWORD or ~/.pgpass, or none)."""
    pg = config.postgresql
    if pg is None:
        return None
    if pg.password_env is not None:
        value = os.environ.get(pg.password_env)
        if not value:
            raise ConfigError(
                str(home.config),
                "vault.postgresql.password_env",
                f"the environment variable {pg.password_env} is not set",
            )
        return value
    if pg.password_secret is not None:
        found = None if secrets is None else secrets.get(pg.password_secret)
        if found is None:
            raise ConfigError(
                str(home.config),
                "vault.postgresql.password_secret",
                f"the vault has no secret named {pg.password_secret!r} "
                f"(`pfar secret set {pg.password_secret}` keeps it there)",
            )
        return found
    return None
