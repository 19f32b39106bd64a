"""`pfar init`: a new home with a config, an empty vault, and example templates."""

from __future__ import annotations

import os
from importlib import resources

from ..config import DEFAULT_CONFIG_TOML
from ..errors import VaultError
from ..journal import Journal
from ..vault.home import Home
from ..vault.secrets import SecretStore
from ..vault.sqlite import open_vault_db


def init_home(home: Home, *, examples: bool = True) -> list[str]:
    """Create what is missing; refuse to touch a vault that already exists."""
    existing = [p for p in (home.sessions_db, home.secrets_db, home.memory_db) if p.exists()]
    if existing:
        raise VaultError(
            f"{home.root} already has a vault ({existing[0].name}); nothing was changed"
        )
    created: list[str] = []
    home.root.mkdir(parents=True, exist_ok=True)
    os.chmod(home.root, 0o700)
    for d in (home.vault_dir, home.templates_dir, home.workspaces_dir, home.root / "scripts"):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not home.config.exists():
        home.config.write_text(DEFAULT_CONFIG_TOML, encoding="utf-8")
        created.append(str(home.config))
    Journal.open(home.sessions_db, create=True).close()
    SecretStore.open(home.secrets_db, create=True).close()
    open_vault_db(home.memory_db, "memory", create=True).close()
    created += [str(home.sessions_db), str(home.secrets_db), str(home.memory_db)]
    if examples:
        assets = resources.files("pfar.cli").joinpath("assets")
        for folder, target in (
            ("templates", home.templates_dir),
            ("scripts", home.root / "scripts"),
        ):
            for entry in assets.joinpath(folder).iterdir():
                dest = target / entry.name
                if not dest.exists():
                    dest.write_text(entry.read_text(encoding="utf-8"), encoding="utf-8")
                    created.append(str(dest))
    return created
