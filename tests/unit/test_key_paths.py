"""Where a home's vault keys lie (vault/key_paths.py): hidden from every sandbox and
refused to every file tool, without hiding the owner's whole home when a key file was
put there."""

from __future__ import annotations

import os
from pathlib import Path

from pfar import init_home
from pfar.tools.protected import Protection
from pfar.tools.sandbox_mounts import hidden_paths
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.key_paths import key_places


def test_the_key_directory_and_the_key_file_are_hidden_and_protected(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    key = tmp_path / "secret-keys" / "vault.key"
    init_home(home, examples=False, encryption="file", key_file=key)
    places = key_places(home.root, owner=tmp_path / "owner")
    assert keys.default_key_dir() in places
    assert key in places and key.parent in places
    hidden = hidden_paths(home.root, owner=tmp_path / "owner")
    assert key in hidden and key.parent in hidden
    guard = Protection.of([], home=home.root, user_home=tmp_path / "owner")
    why = guard.rule(None, os.path.realpath(key))
    assert why is not None and "vault's key" in why
    assert guard.rule(None, str(keys.default_key_dir() / "other.key")) is not None


def test_a_key_file_in_the_owners_home_hides_the_file_not_the_home(tmp_path: Path) -> None:
    owner = tmp_path / "owner"
    home = Home(owner / ".pfar")
    init_home(home, examples=False, encryption="file", key_file=owner / "vault.key")
    places = key_places(home.root, owner=owner)
    assert owner / "vault.key" in places
    assert owner not in places and Path("/") not in places


def test_a_plain_vault_and_an_unreadable_unlock_json_hide_the_key_directory(
    tmp_path: Path,
) -> None:
    home = Home(tmp_path / "home")
    init_home(home, examples=False, encryption="none")
    assert key_places(home.root) == [keys.default_key_dir()]
    (home.vault_dir / "unlock.json").write_text("{not json")
    assert key_places(home.root) == [keys.default_key_dir()]
