"""Where a home's vault keys lie on disk: what no sandboxed command and no file tool may
read (sandbox_mounts.py hides them, protected.py refuses them)."""

from __future__ import annotations

from pathlib import Path

from ..errors import VaultError
from .keys import KeyFile, default_key_dir, read_unlock


def key_places(home_root: Path, owner: Path | None = None) -> list[Path]:
    """pfar's key directory (`$PFAR_KEY_DIR`, `~/.config/pfar/keys`), and every key file
    this home's unlock.json names (the current key, and the old and next ones of a
    rekey) with its directory, unless that directory is `/`, the owner's home or one
    above it (hiding those would hide everything): then the file alone."""
    owner = Path.home() if owner is None else owner
    places = [default_key_dir()]
    try:
        info = read_unlock(home_root / "vault")
    except VaultError:  # an unreadable unlock.json: the kernel refuses to start on it
        info = None
    if info is None:
        return places
    sources = [info.source, *(s.source for s in (info.next, info.old) if s is not None)]
    for source in sources:
        if not isinstance(source, KeyFile):
            continue
        places.append(source.path)
        folder = source.path.parent
        if folder != Path("/") and not owner.is_relative_to(folder):
            places.append(folder)
    return places
