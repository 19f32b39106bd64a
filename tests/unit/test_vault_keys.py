"""The vault key's records: what they print, how unlock.json round-trips, and what a
damaged unlock.json says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfar.errors import VaultCorrupt, VaultError, VaultKeyMissing, VaultKeyWrong
from pfar.vault import keys
from pfar.vault.home import Home


def test_a_key_never_prints_itself() -> None:
    key = keys.VaultKey.generate()
    assert key.hex() not in repr(key)
    assert key.hex() not in str(key)
    assert key.hex() not in f"{key!r} {key}"
    assert key.hex() in key.pragma()


def test_the_check_value_depends_on_the_key_and_the_vault() -> None:
    a, b = keys.VaultKey.generate(), keys.VaultKey.generate()
    assert a.check("v1") == a.check("v1")
    assert a.check("v1") != b.check("v1")
    assert a.check("v1") != a.check("v2")
    assert a.hex() not in a.check("v1")


@pytest.mark.parametrize(
    "source",
    [
        keys.Keychain(account="abc"),
        keys.KeyFile(Path("/somewhere/abc.key")),
        keys.Passphrase(salt="00" * 16, n=2**10, r=8, p=1),
    ],
)
def test_unlock_json_round_trips(tmp_path: Path, source: keys.KeySource) -> None:
    info = keys.UnlockInfo(vault_id="abc", source=source, check="c" * 32, created_at="now")
    keys.write_unlock(tmp_path, info)
    assert keys.read_unlock(tmp_path) == info
    assert (tmp_path / "unlock.json").stat().st_mode & 0o777 == 0o600


def test_no_unlock_json_is_a_plain_vault(tmp_path: Path) -> None:
    assert keys.read_unlock(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not JSON"),
        (json.dumps({"vault_id": "x", "check": "c"}), "'key'"),
        (json.dumps({"vault_id": "x", "check": "c", "key": {"kind": "usb"}}), "'usb'"),
    ],
)
def test_a_damaged_unlock_json_is_named(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "unlock.json").write_text(text)
    with pytest.raises(VaultCorrupt) as caught:
        keys.read_unlock(tmp_path)
    assert str(tmp_path / "unlock.json") in str(caught.value)
    assert says in str(caught.value)
    assert (tmp_path / "unlock.json").read_text() == text  # never "fixed"


def test_a_passphrase_key_is_derived_the_same_way_each_time() -> None:
    source = keys.Passphrase(salt="11" * 16, n=2**10, r=8, p=1)
    assert source.derive("correct horse") == source.derive("correct horse")
    assert source.derive("correct horse") != source.derive("correct horse!")


def test_a_key_file_is_checked_against_the_vault(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    made = keys.create_key(home, "file", key_file=tmp_path / "keys" / "v.key")
    assert keys.load_key(made.info) == made.key
    path = tmp_path / "keys" / "v.key"
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_text(keys.VaultKey.generate().hex())
    with pytest.raises(VaultKeyWrong, match="not this vault's key"):
        keys.load_key(made.info)
    path.unlink()
    with pytest.raises(VaultKeyMissing, match="does not exist"):
        keys.load_key(made.info)


def test_a_key_file_inside_the_home_or_over_another_is_refused(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with pytest.raises(VaultError, match="inside the home"):
        keys.create_key(home, "file", key_file=home.root / "vault.key")
    taken = tmp_path / "taken.key"
    taken.write_text("mine")
    with pytest.raises(VaultError, match="never overwrites a key"):
        keys.create_key(home, "file", key_file=taken)
    assert taken.read_text() == "mine"


def test_no_keychain_here_is_said_plainly(tmp_path: Path) -> None:
    # the tests run with keyring's fail backend (tests/conftest.py)
    assert keys.keychain_backend() is None
    with pytest.raises(VaultError, match="no OS keychain is available"):
        keys.create_key(Home(tmp_path / "home"), "keychain")
    made = keys.create_key(Home(tmp_path / "home"), "auto")
    assert isinstance(made.info.source, keys.KeyFile)
    assert made.fallback_reason is not None
