"""`[vault]`: where the journal lives, how it commits, and the backups the kernel makes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .section import Section


class VaultBackupConfig(Section):
    """`[vault.backup]`: backups the running kernel makes by itself (docs/vault.md)."""

    # where they go, one new directory each (`pfar-<time>`); relative to the home; unset:
    # no scheduled backups
    dir: str | None = None
    # how often; fractions go down to 0.001 (3.6 s), which only tests want
    every_hours: float = Field(24, ge=0.001, le=24 * 365)
    # the newest this many of pfar's backups in `dir` are kept, older ones removed
    keep: int = Field(7, ge=1, le=10_000)
    # a separate key (a file `pfar vault key new` made) instead of the vault's key
    key_file: str | None = None


class PostgresConfig(Section):
    """`[vault.postgresql]`: the server the journal lives on (docs/store.md)."""

    # a libpq DSN or URL without a password: postgresql://pfar@db.home:5432/pfar
    dsn: str = Field(min_length=1)
    # the password: the name of a secret in the vault (`pfar secret set NAME`), or of an
    # environment variable; neither: libpq's own (PGPASSWORD, ~/.pgpass, no password)
    password_secret: str | None = None
    password_env: str | None = None

    @model_validator(mode="after")
    def _no_password_in_dsn(self) -> PostgresConfig:
        if dsn_has_password(self.dsn):
            raise ValueError(
                "dsn holds a password: keep it out of config.toml, in the vault "
                "(password_secret) or the environment (password_env, or PGPASSWORD)"
            )
        if self.password_secret is not None and self.password_env is not None:
            raise ValueError("give password_secret or password_env, not both")
        return self


def dsn_has_password(dsn: str) -> bool:
    """Whether a DSN (key=value or URL) carries a password."""
    from psycopg.conninfo import conninfo_to_dict  # the DSN's own parser, libpq's rules

    try:
        return bool(conninfo_to_dict(dsn).get("password"))
    except Exception:
        # libpq's words quote the text they could not parse, which may be a password
        raise ValueError(
            "not a PostgreSQL DSN that libpq can read (a key=value list or a postgresql:// URL)"
        ) from None


class VaultConfig(Section):
    # where the journal lives: sessions.db in the vault, or a PostgreSQL server; secrets
    # and learnings stay in the local vault either way (docs/store.md says why)
    backend: Literal["sqlite", "postgresql"] = "sqlite"
    postgresql: PostgresConfig | None = None
    # FULL: a commit survives power loss. NORMAL trades the last commits for speed.
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # the owner is told once when the home's disk has less free than this (0: never)
    low_space_mb: int = Field(512, ge=0, le=100_000_000)
    # kept allocated in vault/reserve and deleted when a journal commit fails, so the
    # stop and the next start find room (0: none; kernel/disk.py)
    reserve_mb: int = Field(16, ge=0, le=100_000)
    backup: VaultBackupConfig = VaultBackupConfig()

    @model_validator(mode="after")
    def _postgresql_named(self) -> VaultConfig:
        if self.backend == "postgresql" and self.postgresql is None:
            raise ValueError('backend = "postgresql" needs a [vault.postgresql] dsn')
        return self
