"""`pfar vault encrypt`: a plain vault (from `pfar init --no-encrypt`, or an older pfar)
made encrypted, one file at a time, so that a run killed at any point loses nothing.

The home lock is held throughout: no kernel runs while it works, and none starts. The
key is made and kept first (keychain, key file or passphrase, as `pfar init` does),
then `vault/unlock.json` is written; from then on the vault is an encrypted one, and a
file still plain in it is refused by every command ("finish with `pfar vault
encrypt`"). Each file is then copied under the key and checked before it replaces the
plain one (reencrypt.py). A run killed before unlock.json exists leaves the plain vault
as it was (and, at most, a key kept for nothing); one killed after is finished by the
next `pfar vault encrypt`, which takes the key unlock.json names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VaultError, VaultKeyMissing, VaultKeyWrong, VaultMissing
from . import keys, reencrypt
from .home import Home
from .lock import vault_command_lock


@dataclass(slots=True)
class EncryptResult:
    info: keys.UnlockInfo
    resumed: bool  # an interrupted run was finished
    fallback_reason: str | None  # why "auto" chose a key file
    encrypted: list[str] = field(default_factory=list)  # files this run encrypted
    found_encrypted: list[str] = field(default_factory=list)  # by the run it finished
    leftovers: list[str] = field(default_factory=list)  # partial copies removed
    already: bool = False  # every file was encrypted already: nothing was done


def encrypt_vault(
    home: Home,
    choice: keys.EncryptChoice = "auto",
    *,
    key_file: Path | None = None,
    passphrase: Callable[[], str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> EncryptResult:
    """Encrypt `home`'s vault, or finish an interrupted encryption. `passphrase` is
    asked only when a new passphrase key is made."""
    files = reencrypt.vault_files(home)
    for f in files:
        if not f.path.exists():
            raise VaultMissing(
                f"{f.path} does not exist: this is not a complete vault; nothing was changed "
                "(`pfar init` makes a new home, a backup restores a lost one)"
            )
    with vault_command_lock(home, "pfar vault encrypt"):
        info = keys.read_unlock(home.vault_dir)
        if info is None:
            return _start(home, files, choice, key_file, passphrase, progress)
        if info.next is not None or info.old is not None:
            raise VaultError(
                f"{home.vault_dir} is encrypted and a change of its key is under way: "
                "finish it with `pfar vault rekey`; nothing was changed"
            )
        return _finish(home, files, info, None, progress)


def _start(
    home: Home,
    files: list[reencrypt.VaultFile],
    choice: keys.EncryptChoice,
    key_file: Path | None,
    passphrase: Callable[[], str] | None,
    progress: Callable[[str], None],
) -> EncryptResult:
    for f in files:
        if keys.is_plain_sqlite(f.path) is not True:
            raise VaultError(
                f"{f.path} is not a plain SQLite file, and {home.vault_dir} has no "
                f"{keys.UNLOCK_NAME}: the vault is not a plain one, nor one being encrypted "
                "(was unlock.json lost? restore it from a backup). Nothing was changed"
            )
        reencrypt.check_readable(f.path, None)  # before the key: a damaged file stops here
    if choice == "none":
        raise VaultError("`pfar vault encrypt` needs a key; --no-encrypt has nothing to do")
    for f in files:
        if reencrypt.remove_staging(f.path, "encrypt"):
            progress(f"removed the partial copy of {f.path.name} a killed run left")
    new = keys.create_key(
        home,
        choice,
        key_file=key_file,
        passphrase=passphrase() if choice == "passphrase" and passphrase else None,
    )
    reencrypt.fault("encrypt", "key_created")
    keys.write_unlock(home.vault_dir, new.info)
    reencrypt.fault("encrypt", "unlock_written")
    result = _finish(home, files, new.info, new.key, progress)
    result.resumed = False
    result.fallback_reason = new.fallback_reason
    return result


def _finish(
    home: Home,
    files: list[reencrypt.VaultFile],
    info: keys.UnlockInfo,
    key: keys.VaultKey | None,
    progress: Callable[[str], None],
) -> EncryptResult:
    result = EncryptResult(info=info, resumed=key is None, fallback_reason=None)
    plain = [f for f in files if keys.is_plain_sqlite(f.path)]
    if not plain:
        for f in files:
            if reencrypt.remove_staging(f.path, "encrypt"):
                result.leftovers.append(f.path.name)
        # already encrypted (by an earlier run that was killed after its last file, or
        # long ago): nothing to do, and said so; a script may run this twice
        result.already = key is None
        return result
    if key is None:
        progress(f"finishing an interrupted encryption with the key in {info.source.describe()}")
        try:
            key = keys.load_key(info)
        except (VaultKeyMissing, VaultKeyWrong) as exc:
            if len(plain) == len(files):
                raise type(exc)(
                    f"{exc}. No file is encrypted yet: if that key is lost, move "
                    f"{keys.unlock_path(home.vault_dir)} aside and run `pfar vault encrypt` "
                    "again to make a new one"
                ) from None
            raise
    for f in files:
        if f not in plain:
            # encrypted by the run this one finishes: it was checked before it was put there
            if reencrypt.remove_staging(f.path, "encrypt"):
                result.leftovers.append(f"{f.path.name}.encrypting")
            result.found_encrypted.append(f.path.name)
            continue
        if reencrypt.staging_path(f.path, "encrypt").exists():
            result.leftovers.append(f"{f.path.name}.encrypting")
        reencrypt.reencrypt(f, None, key, "encrypt")
        progress(f"encrypted {f.path}")
        result.encrypted.append(f.path.name)
    keys.forget(home)
    return result
