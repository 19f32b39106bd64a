"""`pfar vault ...`, and what `pfar init` says about the vault's key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click

from ..errors import BadRequest, VaultError
from ..kernel.setup_postgres import PostgresInit
from ..vault import keys
from ..vault.home import Home
from . import vault_backup_cmd
from .output import err, out


def init_choice(choice: str | None, key_file: Path | None) -> tuple[keys.EncryptChoice, str | None]:
    """The encryption `pfar init` was asked for, and the passphrase when it is one."""
    if key_file is not None and choice not in (None, "file"):
        raise click.UsageError(
            "--key-file goes with no other of --keychain, --passphrase, --no-encrypt"
        )
    if key_file is not None:
        return "file", None
    if choice == "passphrase":
        return "passphrase", new_passphrase()
    return cast(keys.EncryptChoice, choice or "auto"), None


def new_passphrase() -> str:
    """A new passphrase: from PFAR_PASSPHRASE_FD, or typed twice at the terminal."""
    import os

    if os.environ.get(keys.PASSPHRASE_FD_ENV):
        return keys.read_passphrase()
    first = keys.read_passphrase("new vault passphrase: ")
    if len(first) < 8:
        raise VaultError("the passphrase is shorter than 8 characters; nothing was created")
    if keys.read_passphrase("again: ") != first:
        raise VaultError("the two passphrases differ; nothing was created")
    return first


def say_where_the_key_went(home: Home, *, asked: str | None) -> None:
    info = keys.read_unlock(home.vault_dir)
    if info is None:
        err.print(
            "vault: NOT encrypted (--no-encrypt): anyone who can read "
            f"{home.vault_dir} can read your secrets. `pfar vault encrypt` encrypts it."
        )
        return
    out.print(f"vault: encrypted (SQLCipher); its key is in {info.source.describe()}")
    if isinstance(info.source, keys.KeyFile) and asked is None:
        err.print(
            "vault: no OS keychain is available here, so the key went to a key file "
            f"(owner-only, outside the home): {info.source.path}. Keep a copy of it apart "
            "from your backups; without it the vault cannot be read."
        )
    elif isinstance(info.source, keys.Passphrase):
        out.print(
            "vault: pfar asks for the passphrase at every start (or reads PFAR_PASSPHRASE_FD)"
        )


@click.group()
def vault() -> None:
    """The vault at rest: encryption, keys, integrity, backups (docs/vault.md)."""


# the commands' modules import this one's helpers: they are added once it is defined
from .vault_encrypt_cmd import encrypt, rekey, status  # noqa: E402
from .vault_integrity_cmd import accept_loss, check  # noqa: E402

for _command in (*vault_backup_cmd.commands, encrypt, rekey, status, check, accept_loss):
    vault.add_command(_command)


def postgres_init(
    dsn: str | None, password_env: str | None, password_secret: str | None
) -> PostgresInit | None:
    """What `pfar init --postgres` was asked for; the password of `--password-secret` is
    read here, from stdin or a hidden prompt (never argv)."""
    if dsn is None:
        if password_env is not None or password_secret is not None:
            raise BadRequest("--password-env/--password-secret", "only with --postgres DSN")
        return None
    if password_env is not None and password_secret is not None:
        raise BadRequest("--password-env/--password-secret", "give one, not both")
    password = None
    if password_secret is not None:
        if sys.stdin.isatty():
            password = click.prompt("PostgreSQL password", hide_input=True, err=True)
        else:
            password = sys.stdin.readline().rstrip("\n")
        if not password:
            raise BadRequest("--password-secret", "no password was given")
    return PostgresInit(dsn, password_env, password_secret, password)
