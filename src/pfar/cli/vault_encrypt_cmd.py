"""`pfar vault encrypt`, `pfar vault rekey`, `pfar vault status`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from ..errors import VaultError
from ..vault import keys
from ..vault.encrypt import encrypt_vault
from ..vault.rekey import NEW_PASSPHRASE_FD_ENV, RekeyChoice, rekey_vault
from ..vault.status import FileStatus, VaultStatus, vault_status
from .output import emit, err, home_of, out
from .vault_cmd import new_passphrase, say_where_the_key_went

F = TypeVar("F", bound=Callable[..., Any])


def _key_options(verb: str) -> Callable[[F], F]:
    def wrap(f: F) -> F:
        f = click.option(
            "--passphrase",
            "choice",
            flag_value="passphrase",
            help=f"{verb} a key stretched from a passphrase at every start (terminal, or the "
            "file descriptor in PFAR_PASSPHRASE_FD).",
        )(f)
        f = click.option(
            "--key-file",
            type=click.Path(dir_okay=False, path_type=Path),
            help=f"{verb} a key kept in this new file (owner-only, outside the home).",
        )(f)
        f = click.option(
            "--keychain", "choice", flag_value="keychain", help=f"{verb} a key in the OS keychain."
        )(f)
        return f

    return wrap


def _choice(choice: str | None, key_file: Path | None) -> str | None:
    if key_file is not None and choice not in (None, "file"):
        raise click.UsageError("--key-file goes with neither --keychain nor --passphrase")
    return "file" if key_file is not None else choice


@click.command("encrypt")
@_key_options("Use")
@click.pass_context
def encrypt(ctx: click.Context, choice: str | None, key_file: Path | None) -> None:
    """Encrypt a plain vault (made with `pfar init --no-encrypt`, or by an older pfar).

    Each database is copied under the new key, checked, and only then put in place of
    the plain one. Run it with the kernel stopped; a run that was interrupted is
    finished by running it again. The key goes where `pfar init` would put it (the
    OS keychain, else a key file), or where an option says."""
    home = home_of(ctx)
    asked = _choice(choice, key_file)
    result = encrypt_vault(
        home,
        cast(keys.EncryptChoice, asked or "auto"),
        key_file=key_file,
        passphrase=new_passphrase,
        progress=out.print,
    )
    if result.already:
        out.print(
            f"vault: already encrypted (its key is in {result.info.source.describe()}); "
            "nothing to do. `pfar vault rekey` changes its key"
        )
        return
    if result.resumed:
        out.print("vault: the interrupted encryption is finished")
        if asked is not None:
            err.print(
                "vault: the options given were not used: the key was made by the run that "
                f"was interrupted, and is in {result.info.source.describe()}"
            )
    for name in result.leftovers:
        out.print(f"removed {name}, the partial copy a killed run left")
    say_where_the_key_went(home, asked=asked if not result.resumed else "resumed")
    out.print(
        "vault: every file was checked under the key before it replaced the plain one; "
        "no plain copy is left"
    )


@click.command("rekey")
@_key_options("Move to")
@click.option(
    "--keep-old-key",
    is_flag=True,
    help="Leave the old key where it is (backups made before the rekey need it).",
)
@click.pass_context
def rekey(
    ctx: click.Context, choice: str | None, key_file: Path | None, keep_old_key: bool
) -> None:
    """Put the vault under a new key, kept in the same kind of place as the old one
    unless an option names another.

    Each database is copied under the new key, checked, and put in place; the old key
    is removed from where it was kept only once every file is under the new one. Run
    it with the kernel stopped; a run that was interrupted is finished by running it
    again. A backup made before the rekey is under the old key: keep a copy of it
    (or --keep-old-key) while you keep such backups."""
    home = home_of(ctx)
    result = rekey_vault(
        home,
        cast(RekeyChoice | None, _choice(choice, key_file)),
        key_file=key_file,
        new_passphrase=_new_rekey_passphrase,
        keep_old_key=keep_old_key,
        progress=out.print,
    )
    if result.resumed:
        out.print("vault: the interrupted key change is finished")
    out.print(f"vault: encrypted under a new key: {result.info.source.describe()}")
    if result.old_key:
        out.print(f"vault: {result.old_key}")
    if isinstance(result.info.source, keys.Passphrase):
        out.print(
            "vault: pfar asks for the new passphrase at every start (or reads "
            f"{keys.PASSPHRASE_FD_ENV})"
        )


def _new_rekey_passphrase() -> str:
    """The new passphrase: from PFAR_NEW_PASSPHRASE_FD (PFAR_PASSPHRASE_FD gives the
    current one), or typed twice at the terminal."""
    if os.environ.get(NEW_PASSPHRASE_FD_ENV):
        return keys.read_passphrase(env=NEW_PASSPHRASE_FD_ENV)
    first = keys.read_passphrase("new vault passphrase: ", env=NEW_PASSPHRASE_FD_ENV)
    if len(first) < 8:
        raise VaultError("the passphrase is shorter than 8 characters; nothing was changed")
    if keys.read_passphrase("again: ", env=NEW_PASSPHRASE_FD_ENV) != first:
        raise VaultError("the two passphrases differ; nothing was changed")
    return first


@click.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether the vault is encrypted, where its key is, each file's size and schema
    version, the last integrity check and the last backup. Reads the files only, with
    or without a running kernel; never asks for a passphrase (give it on
    PFAR_PASSPHRASE_FD to see the schema versions of a passphrase vault)."""
    found = vault_status(home_of(ctx))
    if as_json:
        emit(found.to_json(), True)
        return
    for line in describe(found):
        out.print(line)


_STATES = {
    "encrypted": "encrypted",
    "plain": "NOT encrypted (`pfar vault encrypt` encrypts it)",
    "encrypting": "being encrypted: an encryption was interrupted; `pfar vault encrypt` "
    "finishes it",
    "rekeying": "changing its key: a rekey was interrupted; `pfar vault rekey` finishes it",
    "missing": "missing (no vault file here: `pfar init` makes a home)",
}


def describe(s: VaultStatus) -> list[str]:
    lines = [f"vault: {s.vault}", f"state: {_STATES[s.state]}"]
    if s.cipher is not None:
        lines.append(f"cipher: {s.cipher}")
    if s.vault_id is not None:
        lines.append(f"vault id: {s.vault_id}")
    if s.key is not None:
        lines.append(f"key source: {s.key.where}")
        lines.append(
            f"key: {'available' if s.key.available else f'not available ({s.key.problem})'}"
        )
    if s.next_key is not None:
        lines.append(f"next key: {s.next_key.where}")
    if s.old_key is not None:
        lines.append(f"old key: {s.old_key} (to be removed: `pfar vault rekey` does it)")
    lines.append(f"kernel: {'running' if s.kernel_running else 'not running'}")
    lines.append("files:")
    lines += [f"  {_file_line(f)}" for f in s.files]
    lines.append(f"last integrity check: {_check_line(s.last_check)}")
    lines.append(f"last backup: {_backup_line(s.last_backup)}")
    return lines


def _file_line(f: FileStatus) -> str:
    if not f.exists:
        return f"{f.name}: missing"
    parts = [f"{f.name}: {_bytes(f.size)}"]
    parts.append(f"wal {_bytes(f.wal_size)}" if f.wal_size is not None else "no wal")
    parts.append({True: "encrypted", False: "plain", None: "empty"}[f.encrypted])
    if f.schema_version is not None:
        parts.append(f"schema version {f.schema_version}")
    if f.problem:
        parts.append(f"schema version {f.problem}")
    return ", ".join(parts)


def _bytes(n: int | None) -> str:
    return "?" if n is None else f"{n} bytes"


def _check_line(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "none recorded"
    if "unreadable" in rec:
        return f"unreadable ({rec['unreadable']})"
    ok = rec.get("ok")
    verdict = "ok" if ok is True else "FAILED" if ok is False else f"ok={ok!r}"
    files = rec.get("files")
    shown = ""
    if isinstance(files, dict):
        shown = "; " + ", ".join(f"{k}: {v}" for k, v in files.items())
    elif isinstance(files, list):
        shown = "; " + ", ".join(map(str, files))
    return f"{rec.get('at', '?')}, {verdict}{shown}"


def _backup_line(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "none recorded"
    if "unreadable" in rec:
        return f"unreadable ({rec['unreadable']})"
    position = rec.get("position")
    at = f" (position {position})" if position is not None else ""
    return f"{rec.get('at', '?')} to {rec.get('dest', '?')}{at}"
