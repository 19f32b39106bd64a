"""`pfar vault encrypt` and `pfar vault rekey` SIGKILLed at each point of their work
(PFAR_FAULT=encrypt:POINT, rekey:POINT): what is left either opens as before or is
refused with the command that finishes it, never as damaged, and running the command
again finishes the work with every row as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import said
from ..vault_support import (
    DBS,
    copy_home,
    dump,
    is_plain,
    key_file_of,
    killed,
    ok,
    pfar_env,
    populated_plain_home,
    unlock_json,
)

pytestmark = pytest.mark.crash

FILE_POINTS = ("checkpointed", "exported", "synced", "verified", "wal_removed", "renamed")


@pytest.fixture(scope="module")
def plain_source(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return populated_plain_home(tmp_path_factory.mktemp("plain") / "home")


@pytest.fixture
def plain(plain_source: Home, tmp_path: Path) -> Home:
    return copy_home(plain_source, tmp_path / "home")


def _reads_as_before(home: Home) -> None:
    """pfar opens the vault and reads it (the rows themselves are compared by dump)."""
    assert len(json.loads(ok(pfar_env(home, "tasks", "--json")))) == 3


# what reads each file, to see a half-encrypted one refused
_READER = {
    "sessions.db": ("tasks", "--json"),
    "secrets.db": ("secret", "list"),
    "memory.db": ("learnings", "search", "staging"),
}


def _leftovers(home: Home) -> list[str]:
    return sorted(
        p.name for p in home.vault_dir.iterdir() if ".encrypting" in p.name or ".rekeying" in p.name
    )


def _killed_at(home: Home, fault: str, *args: str) -> None:
    r = pfar_env(home, "vault", *args, env={"PFAR_FAULT": fault})
    assert killed(r), said(r)
    assert f"fault hook: SIGKILL after {fault}" in r.stderr


ENCRYPT_POINTS = [
    "unlock_written",
    *FILE_POINTS,
    "exported:secrets",
    "renamed:secrets",
    "renamed:memory",
]


def test_encrypt_killed_before_unlock_json_leaves_the_plain_vault_as_it_was(
    plain: Home, tmp_path: Path
) -> None:
    before = dump(plain)
    key = tmp_path / "keys" / "first.key"
    _killed_at(plain, "encrypt:key_created", "encrypt", "--key-file", str(key))
    assert key.exists()  # made, then the run was killed: it locks nothing
    assert not (plain.vault_dir / "unlock.json").exists()
    assert all(is_plain(plain.vault_dir / n) for n in DBS)
    _reads_as_before(plain)
    again = pfar_env(plain, "vault", "encrypt", "--key-file", str(key))
    assert again.returncode == 1 and "pfar never overwrites a key" in said(again)
    ok(pfar_env(plain, "vault", "encrypt", "--key-file", str(tmp_path / "keys" / "second.key")))
    assert key_file_of(plain) == tmp_path / "keys" / "second.key"
    assert dump(plain) == before
    _reads_as_before(plain)


@pytest.mark.parametrize("point", ENCRYPT_POINTS)
def test_encrypt_killed_at_each_point_is_finished_by_running_it_again(
    plain: Home, tmp_path: Path, point: str
) -> None:
    before = dump(plain)
    key = tmp_path / "keys" / "vault.key"
    _killed_at(plain, f"encrypt:{point}", "encrypt", "--key-file", str(key))
    assert key_file_of(plain) == key  # unlock.json was written before any file changed
    plain_left = [n for n in DBS if is_plain(plain.vault_dir / n)]
    if plain_left:
        # a plain file in a vault that has a key: refused, and said how to finish
        r = pfar_env(plain, *_READER[plain_left[0]])
        assert r.returncode == 1, said(r)
        assert "is a plain SQLite file in an encrypted vault" in said(r)
        assert "finish with `pfar vault encrypt`" in said(r)
        status = json.loads(ok(pfar_env(plain, "vault", "status", "--json")))
        assert status["state"] == "encrypting"
    else:
        _reads_as_before(plain)
    r = ok(pfar_env(plain, "vault", "encrypt"))
    if plain_left:
        assert "finishing an interrupted encryption with the key in the key file" in r
    assert not any(is_plain(plain.vault_dir / n) for n in DBS)
    assert _leftovers(plain) == []
    assert key_file_of(plain) == key
    assert dump(plain) == before
    _reads_as_before(plain)


REKEY_POINTS = [
    "key_created",
    "next_written",
    *FILE_POINTS,
    "renamed:secrets",
    "switched",
    "old_removed",
]


@pytest.mark.parametrize("point", REKEY_POINTS)
def test_rekey_killed_at_each_point_is_finished_by_running_it_again(
    plain: Home, tmp_path: Path, point: str
) -> None:
    keys_dir = tmp_path / "keys"
    old = keys_dir / "old.key"
    ok(pfar_env(plain, "vault", "encrypt", "--key-file", str(old)))
    before = dump(plain)
    old_check = unlock_json(plain)["check"]
    _killed_at(plain, f"rekey:{point}", "rekey")
    info = unlock_json(plain)
    new_files = sorted(p for p in keys_dir.iterdir() if p != old)
    assert len(new_files) == 1  # the new key was kept before unlock.json named it
    if point == "key_created":
        assert "next" not in info and info["check"] == old_check  # as before
        _reads_as_before(plain)
    elif "next" in info:
        assert info["check"] == old_check and info["next"]["key"]["path"] == str(new_files[0])
        r = pfar_env(plain, "tasks", "--json")
        assert r.returncode == 1, said(r)
        assert "a change of the vault's key (`pfar vault rekey`) was interrupted" in said(r)
        assert "Finish it with `pfar vault rekey`" in said(r)
        assert json.loads(ok(pfar_env(plain, "vault", "status", "--json")))["state"] == "rekeying"
    else:  # every file is under the new key: the vault opens; the old key awaits removal
        assert info["key"]["path"] == str(new_files[0]) and info["old"]["check"] == old_check
        assert old.exists() == (point == "switched")
        _reads_as_before(plain)
    r = ok(pfar_env(plain, "vault", "rekey"))
    info = unlock_json(plain)
    assert "next" not in info and "old" not in info
    assert info["check"] != old_check
    assert not old.exists()
    if point in ("switched", "old_removed"):
        assert "interrupted key change is finished" in r
    assert _leftovers(plain) == []
    assert dump(plain) == before
    _reads_as_before(plain)
