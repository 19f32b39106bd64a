"""A new home: a config, an empty vault, and example templates (`pfar init`, `pfar.init_home`).

The home is built whole in a temporary directory next to the target (so on the same
filesystem), synced, and only then put in place: renamed as a whole when the target
does not exist, or entry by entry into an existing directory with the vault last.
The vault is what makes a home, so a killed init leaves either no vault (the next
init completes the home) or a complete one; never a vault with a database missing.
A staging directory a killed init left behind is removed by the next init, first
thing, even when that init then finds a complete home and changes nothing else: only
directories named as init names them (`.NAME.init-PID-XXXXXXXX`), owned by this user,
not symlinks, whose init process is gone.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import stat
import tempfile
from importlib import resources
from pathlib import Path

from ..config import DEFAULT_CONFIG_TOML
from ..errors import VaultError
from ..journal.sqlite import open_journal
from ..vault import keys
from ..vault.durable import fsync_dir
from ..vault.home import Home
from ..vault.secrets import SecretStore
from ..vault.sqlite import open_vault_db
from .setup_postgres import PostgresInit, create_journal, with_postgres

# Test-only: `PFAR_FAULT=init:POINT` SIGKILLs `pfar init` right after POINT, as
# journal/faults.py does for the kernel's journal points.
FAULT_ENV = "PFAR_FAULT"
FAULT_POINTS = ("staged", "vault_created", "synced", "moved", "placed")


def init_home(
    home: Home,
    *,
    examples: bool = True,
    encryption: keys.EncryptChoice = "auto",
    key_file: Path | None = None,
    passphrase: str | None = None,
    postgres: PostgresInit | None = None,
) -> list[str]:
    """Create what is missing; refuse to touch a vault that already exists.

    The vault is encrypted unless `encryption` is "none": "auto" keeps its key in the OS
    keychain where one exists, else in a key file outside the home (vault/unlock.json
    says which; `keys.read_unlock` reads it back)."""
    _remove_leftovers(home)
    existing = [p for p in (home.sessions_db, home.secrets_db, home.memory_db) if p.exists()]
    if existing:
        raise VaultError(
            f"{home.root} already has a vault ({existing[0].name}); nothing was changed"
        )
    if home.root.exists() and not home.root.is_dir():
        raise VaultError(f"{home.root} exists and is not a directory; nothing was changed")
    if home.vault_dir.is_dir() and any(home.vault_dir.iterdir()):
        # e.g. a -wal file whose database is gone: it may hold committed data
        raise VaultError(
            f"{home.vault_dir} holds files but no complete vault; nothing was changed. "
            "Restore the vault from a backup, or move that directory elsewhere to start anew"
        )
    parent = home.root.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{home.root.name}.init-{os.getpid()}-", dir=parent))
    new_key = None
    try:
        if encryption != "none":
            new_key = keys.create_key(home, encryption, key_file=key_file, passphrase=passphrase)
        _build(Home(staging), examples, new_key, postgres)
        _fault("staged")
        _sync_tree(staging)
        _fault("synced")
        if not home.root.exists():
            created = [str(home.root / rel) for rel in _files(staging)]
            os.rename(staging, home.root)
            fsync_dir(parent)
        else:
            created = _move_into(staging, home.root)
        _fault("placed")
    except BaseException:
        if new_key is not None and not home.secrets_db.exists():
            keys.discard(new_key.info.source)  # made for a vault that never came to be
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return created


def _build(
    home: Home, examples: bool, new_key: keys.NewKey | None, postgres: PostgresInit | None
) -> None:
    for d in (home.vault_dir, home.templates_dir, home.workspaces_dir, home.scripts_dir):
        d.mkdir(mode=0o700)
    config = (
        DEFAULT_CONFIG_TOML if postgres is None else with_postgres(DEFAULT_CONFIG_TOML, postgres)
    )
    _write(home.config, config)
    key = None
    if new_key is not None:
        keys.write_unlock(home.vault_dir, new_key.info)
        key = new_key.key
    SecretStore.open(home.secrets_db, key=key, create=True).close()
    open_vault_db(home.memory_db, "memory", key=key, create=True).close()
    if postgres is None:
        open_journal(home.sessions_db, key=key, create=True).close()
    else:
        # the server's tables last: a server that refuses leaves no home behind
        create_journal(home, postgres, key)
    _fault("vault_created")
    if examples:
        assets = resources.files("pfar.kernel").joinpath("assets")
        for folder, target in (("templates", home.templates_dir), ("scripts", home.scripts_dir)):
            for entry in assets.joinpath(folder).iterdir():
                _write(target / entry.name, entry.read_text(encoding="utf-8"))


def _move_into(staging: Path, root: Path) -> list[str]:
    """Move what `root` lacks from `staging` into it, the vault last; keep what it has."""
    os.chmod(root, 0o700)
    moved: list[str] = []
    entries = sorted(staging.iterdir(), key=lambda p: p.name == "vault")
    for entry in entries:
        dest = root / entry.name
        if entry.name == "vault" or not dest.exists():
            # an empty vault/ left by an older, interrupted init is replaced whole
            moved += [str(dest / rel) for rel in _files(entry)] if entry.is_dir() else [str(dest)]
            if entry.name == "vault":
                _fault("moved")
            os.rename(entry, dest)
        elif entry.is_dir() and dest.is_dir():
            for child in sorted(entry.iterdir()):
                if not (dest / child.name).exists():
                    os.rename(child, dest / child.name)
                    moved.append(str(dest / child.name))
            fsync_dir(dest)
    fsync_dir(root)
    return moved


def _remove_leftovers(home: Home) -> None:
    """Staging directories of inits that were killed; one whose process lives is left,
    and so is anything not named, owned and made as init makes them."""
    # tempfile.mkdtemp's suffix: 8 characters of [a-z0-9_]
    own = re.compile(rf"\.{re.escape(home.root.name)}\.init-(\d+)-[a-z0-9_]{{8}}")
    for leftover in home.root.parent.glob(f".{glob.escape(home.root.name)}.init-*-*"):
        match = own.fullmatch(leftover.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            st = leftover.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue  # a symlink, a file, or someone else's: never ours to remove
        shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(path: Path, text: str) -> None:
    # owner-only from the start: a home others can write is refused (vault/perms.py)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def _sync_tree(root: Path) -> None:
    """fsync every file and directory under `root` (and `root`): durable before it is
    renamed into place."""
    for path in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif path.is_dir():
            fsync_dir(path)
    fsync_dir(root)


def _fault(point: str) -> None:
    if os.environ.get(FAULT_ENV) == f"init:{point}":
        with contextlib.suppress(OSError):
            os.write(2, f"pfar: fault hook: SIGKILL after init:{point}\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)
