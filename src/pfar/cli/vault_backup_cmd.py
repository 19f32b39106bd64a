"""`pfar vault backup`, `pfar vault restore` and `pfar vault key ...` (docs/vault.md,
"Backups and restore" and "Moving a vault to another machine").

The backup reads the vault itself, on read-only connections of its own, rather than
asking a running kernel through the control socket: SQLite's WAL lets those readers
run beside the kernel's writer without holding it up, and the same command then works
whether a kernel runs or not (the kernel's scheduled backups call the same code in a
thread of their own)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import click

from ..errors import VaultError
from ..kernel.audit import AuditLog
from ..policy.redact import Redactor
from ..vault import keys
from ..vault.backup import BackupKey, make_backup
from ..vault.home import Home
from ..vault.key_place import export_key, import_key, read_key_file
from ..vault.manifest import Manifest, describe_tasks
from ..vault.restore import Restored, restore
from .output import err, home_of, out

_KEY_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option(
    "--backup-key-file",
    type=_KEY_FILE,
    help="Encrypt the backup with the key in this file (`pfar vault key new FILE` makes "
    "one) instead of the vault's key.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the backup's manifest.")
@click.pass_context
def backup(ctx: click.Context, dest: Path, backup_key_file: Path | None, as_json: bool) -> None:
    """Back the vault up into the new directory DEST, while a kernel runs or not."""
    home = home_of(ctx)
    backup_key = None
    if backup_key_file is not None:
        path = backup_key_file.expanduser().absolute()
        backup_key = BackupKey(read_key_file(path), path)
    manifest = make_backup(home, dest, key=keys.unlock(home), backup_key=backup_key)
    if as_json:
        click.echo(json.dumps(manifest.to_json(), indent=2))
        return
    out.print(f"backup: {dest.expanduser().absolute()}")
    out.print(
        f"  made {manifest.made_at}; journal position {manifest.position}; "
        f"tasks: {describe_tasks(manifest.tasks)}"
    )
    _say_encryption(manifest, backup_key)


def _say_encryption(manifest: Manifest, backup_key: BackupKey | None) -> None:
    if backup_key is not None:
        out.print(
            f"  encrypted with the backup key in {backup_key.path}: restoring it takes that "
            "key (--backup-key-file)"
            + (" and the vault's key" if manifest.vault_id else "")
            + "; keep the key apart from the backup"
        )
    elif manifest.encryption == "vault-key":
        out.print(
            "  encrypted with the vault's key: restoring it on another machine takes that "
            "key; `pfar vault key export FILE` writes a copy to keep apart from the backup"
        )
    else:
        err.print(
            "  NOT encrypted: the vault is plain, and so is its backup; anyone who can read "
            "it can read your secrets (`pfar vault encrypt`, or --backup-key-file)"
        )


@click.command("restore")
@click.argument("src", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--force",
    is_flag=True,
    help="Replace a vault that is newer than the backup (or cannot be read); it is moved "
    "aside, never deleted.",
)
@click.option(
    "--key-file",
    type=_KEY_FILE,
    help="The vault's key (what `pfar vault key export` wrote), where this machine does "
    "not have it; stored where this machine keeps keys.",
)
@click.option(
    "--backup-key-file", type=_KEY_FILE, help="The backup key, for a backup made with one."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def restore_cmd(
    ctx: click.Context,
    src: Path,
    force: bool,
    key_file: Path | None,
    backup_key_file: Path | None,
    as_json: bool,
) -> None:
    """Put the backup SRC in place of the vault (no kernel may be running)."""
    home = home_of(ctx)
    done = restore(home, src, force=force, key_file=key_file, backup_key_file=backup_key_file)
    _audit(home.audit_log, done)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "backup": done.manifest.to_json(),
                    "moved_aside": str(done.aside) if done.aside else None,
                    "key_stored": done.key_stored,
                },
                indent=2,
            )
        )
        return
    m = done.manifest
    out.print(
        f"restored {home.vault_dir} from {src.expanduser().absolute()} (made {m.made_at}; "
        f"journal position {m.position}; tasks: {describe_tasks(m.tasks)})"
    )
    if done.aside is not None:
        out.print(
            f"the vault it replaced is in {done.aside}; pfar never deletes it: remove it "
            "yourself once the restored vault is as you want it"
        )
    if done.key_stored is not None:
        out.print(f"the vault's key was stored in {done.key_stored}")
    out.print("the next `pfar run` reports the tasks as of the backup and what was lost since")


def _audit(path: Path, done: Restored) -> None:
    audit = AuditLog(path, Redactor())
    try:
        audit.log(
            "vault_restored",
            backup_id=done.manifest.backup_id,
            made_at=done.manifest.made_at,
            position=done.manifest.position,
            moved_aside=str(done.aside) if done.aside else None,
        )
    finally:
        audit.close()


@click.group("key")
def key_group() -> None:
    """The vault's key: export it, import it, make a backup key."""


@key_group.command("export")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.pass_context
def key_export(ctx: click.Context, file: Path) -> None:
    """Write the vault's key to FILE, a new owner-only file (`-`: to a pipe)."""
    home = home_of(ctx)
    if str(file) == "-":
        _export_to_stdout(home)
        return
    export_key(home, file)
    out.print(
        f"the vault's key is in {file.expanduser().absolute()} (owner-only). Keep it apart "
        "from your backups; on another machine, `pfar vault restore SRC --key-file FILE` "
        "or `pfar vault key import FILE` uses it"
    )


def _export_to_stdout(home: Home) -> None:
    """The key on stdout, only into a pipe or an owner-only file: on a terminal it would
    stay in the scrollback, and a file the shell made may be readable by others."""
    fd = sys.stdout.fileno()
    if os.isatty(fd):
        raise click.UsageError(
            "the key is not shown on a terminal (it would stay in the scrollback); pipe "
            "it (`pfar vault key export - | ...`) or give a FILE"
        )
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
        raise click.UsageError(
            f"stdout is a file others can read (mode {st.st_mode & 0o777:o}); give the "
            "FILE to `pfar vault key export` instead, and it is made owner-only"
        )
    key = keys.unlock(home)
    if key is None:
        raise VaultError(f"{home.vault_dir} is not encrypted: it has no key to export")
    sys.stdout.write(key.hex() + "\n")
    sys.stdout.flush()


@key_group.command("import")
@click.argument("file", type=_KEY_FILE)
@click.pass_context
def key_import(ctx: click.Context, file: Path) -> None:
    """Store the key in FILE for this vault, where its unlock.json says (after checking
    it is this vault's key)."""
    info, stored = import_key(home_of(ctx), file)
    where = info.source.describe()
    out.print(f"the vault's key is {'now' if stored else 'already'} in {where}")


@key_group.command("new")
@click.argument("file", type=_KEY_FILE)
@click.pass_context
def key_new(ctx: click.Context, file: Path) -> None:
    """Make a new random key in FILE (owner-only): a backup key for --backup-key-file."""
    keys.write_key_file(file, keys.VaultKey.generate(), home_of(ctx))
    out.print(
        f"a new key is in {file.expanduser().absolute()} (owner-only); a backup made with "
        "it cannot be restored without it"
    )


commands = [backup, restore_cmd, key_group]
