"""The vault's key in a key file: readable by the owner only, outside the home (a
headless server)."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import VaultError, VaultKeyMissing
from ..durable import fsync_dir
from ..home import Home
from .sources import KeyFile
from .vault_key import VaultKey

KEY_DIR_ENV = "PFAR_KEY_DIR"


def default_key_dir() -> Path:
    """Where key files go unless the owner names one: `$PFAR_KEY_DIR`, else
    `$XDG_CONFIG_HOME/pfar/keys` (`~/.config/pfar/keys`). Never inside a home."""
    override = os.environ.get(KEY_DIR_ENV)
    if override:
        return Path(override).expanduser().absolute()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser().absolute() / "pfar" / "keys"


def default_key_file(vault_id: str) -> Path:
    return default_key_dir() / f"{vault_id}.key"


def write_key_file(path: Path, key: VaultKey, home: Home) -> None:
    """Create the key file (0600, in a 0700 directory); refuse one inside the home or
    one that exists (a key is never overwritten: it may be the only copy)."""
    path = path.expanduser().absolute()
    if path.is_relative_to(home.root.absolute()):
        raise VaultError(
            f"the key file {path} would be inside the home {home.root}: a key kept next to "
            "what it locks protects nothing. Choose a path outside it"
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise VaultError(
            f"the key file {path} exists; pfar never overwrites a key. Move it away or "
            "choose another path"
        ) from None
    try:
        os.write(fd, (key.hex() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def read_key_file(source: KeyFile) -> VaultKey:
    path = source.path
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise VaultKeyMissing(
            f"the vault's key file {path} does not exist. Put the key file back (from "
            "where you kept a copy), or restore the vault from a backup with its key"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise VaultKeyMissing(f"the vault's key file {path} cannot be read ({exc})") from None
    if st.st_mode & 0o077:
        raise VaultKeyMissing(
            f"the vault's key file {path} is readable by others (mode "
            f"{st.st_mode & 0o777:o}); refused. Fix it with `chmod 600 {path}`"
        )
    return VaultKey.from_hex(text, f"the key file {path}")
