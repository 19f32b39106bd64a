"""`pfar vault encrypt`, `pfar vault rekey` and `pfar vault status` through the real CLI,
on a home with real work in every vault file: the data comes through row for row, no
plain copy is left, the kernel starts on the result, and a running kernel (or one
that would start) is never raced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pfar.vault.driver import sqlite
from pfar.vault.home import Home, HomeLock
from pfar.vault.schema import latest_version

from ..support import pfar, running_kernel, said
from ..vault_support import (
    CANARY,
    DBS,
    copy_home,
    dump,
    file_states,
    is_plain,
    key_file_of,
    ok,
    pfar_env,
    populated_plain_home,
    unlock_json,
)

pytestmark = pytest.mark.crash  # kernels run as subprocesses

SESSIONS_SCHEMA = latest_version("sessions")  # the journal's newest schema


@pytest.fixture(scope="module")
def plain_source(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return populated_plain_home(tmp_path_factory.mktemp("plain") / "home")


@pytest.fixture
def plain(plain_source: Home, tmp_path: Path) -> Home:
    return copy_home(plain_source, tmp_path / "home")


def _no_canary_in_clear(home: Home) -> None:
    leaked = [
        str(p)
        for p in home.vault_dir.rglob("*")
        if p.is_file() and CANARY.encode() in p.read_bytes()
    ]
    assert leaked == []


def test_encrypt_keeps_every_row_and_leaves_no_plain_copy(plain: Home, tmp_path: Path) -> None:
    before = dump(plain)
    assert CANARY.encode() in plain.secrets_db.read_bytes()  # what encryption is for
    key = tmp_path / "keys" / "vault.key"
    r = ok(pfar(plain, "vault", "encrypt", "--key-file", str(key)))
    assert f"its key is in the key file {key}" in r
    assert "no plain copy is left" in r
    assert key.stat().st_mode & 0o777 == 0o600
    # the databases and what says how to open them; the records a kernel keeps beside
    # them (what it acknowledged, its last start-up check) stay as they were
    records = {"acknowledged", "last-check.json"}
    assert sorted(p.name for p in plain.vault_dir.iterdir() if p.name not in records) == sorted(
        [*DBS, "unlock.json"]
    )
    for name in DBS:
        assert not is_plain(plain.vault_dir / name), name
    _no_canary_in_clear(plain)
    assert dump(plain) == before  # schema, every row, sqlite_sequence
    # the kernel starts on it, and everything reads: tasks, the secret, the FTS index
    with running_kernel(plain):
        listed = json.loads(ok(pfar(plain, "tasks", "--json")))
        assert len(listed) == 3 and {t["state"] for t in listed} == {"Completed"}
        ok(pfar(plain, "secret", "set", "another", stdin="value-number-2"))
    assert "canary" in ok(pfar(plain, "secret", "list"))
    assert "quokka" in ok(pfar(plain, "learnings", "search", "staging"))
    again = pfar(plain, "vault", "encrypt")
    assert again.returncode == 0, said(again)
    assert "already encrypted" in said(again) and "nothing to do" in said(again)


def test_encrypt_with_a_passphrase_given_on_a_descriptor(plain: Home) -> None:
    r = pfar_env(
        plain, "vault", "encrypt", "--passphrase", fds={"PFAR_PASSPHRASE_FD": "a long passphrase\n"}
    )
    assert r.returncode == 0, said(r)
    assert unlock_json(plain)["key"]["kind"] == "passphrase"
    assert not any(is_plain(plain.vault_dir / n) for n in DBS)
    listed = pfar_env(plain, "tasks", "--json", fds={"PFAR_PASSPHRASE_FD": "a long passphrase\n"})
    assert len(json.loads(ok(listed))) == 3
    wrong = pfar_env(plain, "tasks", "--json", fds={"PFAR_PASSPHRASE_FD": "not the one\n"})
    assert wrong.returncode == 1 and "is not this vault's key" in said(wrong)


def test_encrypt_refuses_while_a_kernel_runs_and_changes_nothing(plain: Home) -> None:
    key_dir = Path(os.environ["PFAR_KEY_DIR"])
    keys_before = sorted(key_dir.iterdir())
    with running_kernel(plain) as k:
        vault_before = sorted(p.name for p in plain.vault_dir.iterdir())
        r = pfar(plain, "vault", "encrypt")
        assert r.returncode == 1
        assert f"in use by a running kernel or another pfar command (pid {k.proc.pid})" in said(r)
        assert "Stop the kernel" in said(r) and "nothing was changed" in said(r)
        # the kernel writes on (its -wal changes): what encrypt would have made is not there
        assert sorted(p.name for p in plain.vault_dir.iterdir()) == vault_before
        assert "unlock.json" not in vault_before
        assert all(is_plain(plain.vault_dir / n) for n in DBS)
        assert sorted(key_dir.iterdir()) == keys_before  # no key was made


def test_the_home_lock_keeps_offline_writers_and_kernels_out(plain: Home) -> None:
    """While a vault command holds the home (as encrypt and rekey do), a kernel does not
    start and `pfar secret set` without a kernel does not write behind its back."""
    lock = HomeLock(plain)
    lock.acquire()  # what `pfar vault encrypt` holds while it works
    try:
        before = file_states(plain)
        # (a command that finds the home held waits for a kernel to answer, as for one
        # starting: not here)
        r = pfar_env(
            plain, "secret", "set", "late", env={"PFAR_START_WAIT": "0"}, stdin="late-value"
        )
        assert r.returncode == 1, said(r)
        assert "in use by a running kernel or another pfar command" in said(r)
        run = pfar(plain, "run", "--no-stdin", timeout=60)
        assert run.returncode != 0 and "owned by a running kernel" in said(run)
        assert file_states(plain) == before
    finally:
        lock.release()
    ok(pfar(plain, "secret", "set", "late", stdin="late-value"))


def test_rekey_moves_every_file_to_a_new_key_and_removes_the_old_one(
    plain: Home, tmp_path: Path
) -> None:
    ok(pfar(plain, "vault", "encrypt", "--key-file", str(tmp_path / "keys" / "first.key")))
    before = dump(plain)
    first = unlock_json(plain)
    r = ok(pfar(plain, "vault", "rekey"))
    after = unlock_json(plain)
    new_key = key_file_of(plain)
    assert new_key.parent == tmp_path / "keys" and new_key.name != "first.key"
    assert after["vault_id"] == first["vault_id"] and after["check"] != first["check"]
    assert "next" not in after and "old" not in after
    assert f"the old key file {tmp_path / 'keys' / 'first.key'} was removed" in r
    assert not (tmp_path / "keys" / "first.key").exists()
    assert dump(plain) == before
    with running_kernel(plain):
        assert len(json.loads(ok(pfar(plain, "tasks", "--json")))) == 3


def test_rekey_to_another_place_and_keeping_the_old_key(plain: Home, tmp_path: Path) -> None:
    old = tmp_path / "keys" / "old.key"
    ok(pfar(plain, "vault", "encrypt", "--key-file", str(old)))
    before = dump(plain)
    r = pfar_env(
        plain,
        "vault",
        "rekey",
        "--passphrase",
        "--keep-old-key",
        fds={"PFAR_NEW_PASSPHRASE_FD": "the new passphrase\n"},
    )
    assert r.returncode == 0, said(r)
    assert f"the old key was kept in the key file {old}" in said(r)
    assert old.exists()  # kept, as asked: a backup made before may need it
    assert unlock_json(plain)["key"]["kind"] == "passphrase"
    listed = pfar_env(plain, "tasks", "--json", fds={"PFAR_PASSPHRASE_FD": "the new passphrase\n"})
    assert len(json.loads(ok(listed))) == 3
    back = pfar_env(
        plain,
        "vault",
        "rekey",
        "--key-file",
        str(tmp_path / "keys" / "again.key"),
        fds={"PFAR_PASSPHRASE_FD": "the new passphrase\n"},
    )
    assert back.returncode == 0, said(back)
    assert "the old passphrase no longer opens the vault" in said(back)
    assert dump(plain) == before


def test_rekey_and_encrypt_say_what_to_do_when_they_do_not_apply(plain: Home) -> None:
    r = pfar(plain, "vault", "rekey")
    assert r.returncode == 1 and "is not encrypted" in said(r) and "pfar vault encrypt" in said(r)
    r = pfar(plain, "vault", "encrypt", "--keychain")
    assert r.returncode == 1 and "no OS keychain is available here" in said(r)
    assert not (plain.vault_dir / "unlock.json").exists()
    assert all(is_plain(plain.vault_dir / n) for n in DBS)


def test_status_of_a_plain_then_encrypted_vault_reads_and_writes_nothing(
    plain: Home, tmp_path: Path
) -> None:
    (plain.vault_dir / "last-check.json").unlink(missing_ok=True)  # the fixture's kernel's
    before = file_states(plain)
    r = ok(pfar(plain, "vault", "status"))
    assert file_states(plain) == before  # no -wal or -shm made, nothing touched
    assert "state: NOT encrypted" in r
    assert "sessions.db: " in r and f"plain, schema version {SESSIONS_SCHEMA}" in r
    assert "last integrity check: none recorded" in r and "last backup: none recorded" in r
    key = tmp_path / "keys" / "vault.key"
    ok(pfar(plain, "vault", "encrypt", "--key-file", str(key)))
    (plain.vault_dir / "last-check.json").write_text(
        json.dumps({"at": "2026-11-20T10:00:00Z", "ok": True, "files": ["sessions.db"]})
    )
    (plain.vault_dir / "last-backup.json").write_text(
        json.dumps({"at": "2026-11-21T10:00:00Z", "dest": "/backups/pfar-1", "position": 42})
    )
    before = file_states(plain)
    r = ok(pfar(plain, "vault", "status"))
    assert file_states(plain) == before
    vault_id = unlock_json(plain)["vault_id"]
    for line in (
        "state: encrypted",
        "cipher: SQLCipher 4.",
        f"vault id: {vault_id}",
        f"key source: the key file {key}",
        "key: available",
        "kernel: not running",
        f"encrypted, schema version {SESSIONS_SCHEMA}",
        "last integrity check: 2026-11-20T10:00:00Z, ok; sessions.db",
        "last backup: 2026-11-21T10:00:00Z to /backups/pfar-1 (position 42)",
    ):
        assert line in r, (line, r)
    assert key.read_text().strip() not in r  # the key itself: never
    as_json = json.loads(ok(pfar(plain, "vault", "status", "--json")))
    assert as_json["state"] == "encrypted" and as_json["key"]["available"] is True
    assert [f["name"] for f in as_json["files"]] == list(DBS)
    assert all(f["encrypted"] and f["size"] > 0 for f in as_json["files"])
    assert as_json["last_backup"]["position"] == 42


def test_status_with_a_running_kernel_and_without_its_key(plain: Home, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "vault.key"
    ok(pfar(plain, "vault", "encrypt", "--key-file", str(key)))
    with running_kernel(plain):
        r = ok(pfar(plain, "vault", "status"))
        assert "kernel: running" in r and f"encrypted, schema version {SESSIONS_SCHEMA}" in r
    key.rename(tmp_path / "elsewhere.key")
    before = file_states(plain)
    r = pfar(plain, "vault", "status")
    assert r.returncode == 0, said(r)
    assert f"key: not available (the vault's key file {key} does not exist" in said(r)
    assert "schema version not read: the key is not available" in said(r)
    assert "state: encrypted" in said(r)
    assert file_states(plain) == before
    as_json = json.loads(ok(pfar(plain, "vault", "status", "--json")))
    assert as_json["key"]["available"] is False
    assert all(f["schema_version"] is None and f["size"] for f in as_json["files"])


def test_status_never_asks_for_a_passphrase(plain: Home) -> None:
    r = pfar_env(
        plain, "vault", "encrypt", "--passphrase", fds={"PFAR_PASSPHRASE_FD": "a long passphrase\n"}
    )
    assert r.returncode == 0, said(r)
    r = pfar_env(plain, "vault", "status")
    assert r.returncode == 0, said(r)
    assert "key: not available (a passphrase, not asked for here" in said(r)
    given = pfar_env(plain, "vault", "status", fds={"PFAR_PASSPHRASE_FD": "a long passphrase\n"})
    assert "key: available" in said(given) and f"schema version {SESSIONS_SCHEMA}" in said(given)


def _damage_plain(path: Path, table: str) -> None:
    """Break the b-tree page header of `table`'s root page: the file opens, its other
    tables read, and quick_check finds it."""
    conn = sqlite.connect(str(path))
    try:
        root = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    with open(path, "r+b") as f:
        f.seek((root[0] - 1) * page_size)
        f.write(b"\xff")


def _damage_encrypted(path: Path) -> None:
    """Overwrite bytes of the file's last page: its HMAC fails when it is read."""
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size - 2048)
        f.write(b"\xff" * 64)


def test_a_damaged_plain_file_is_not_encrypted(plain: Home, tmp_path: Path) -> None:
    key_dir = tmp_path / "keys"
    _damage_plain(plain.sessions_db, "task_journal")
    before = file_states(plain)
    r = pfar(plain, "vault", "encrypt", "--key-file", str(key_dir / "vault.key"))
    assert r.returncode == 1, said(r)
    assert f"{plain.sessions_db} cannot be read whole" in said(r)
    assert "the file is damaged" in said(r) and "Nothing was changed" in said(r)
    assert file_states(plain) == before and not key_dir.exists()  # no key made either


def test_a_damaged_encrypted_file_is_not_rekeyed(plain: Home, tmp_path: Path) -> None:
    key_dir = tmp_path / "keys"
    ok(pfar(plain, "vault", "encrypt", "--key-file", str(key_dir / "vault.key")))
    _damage_encrypted(plain.secrets_db)
    before, keys_before = file_states(plain), sorted(key_dir.iterdir())
    r = pfar(plain, "vault", "rekey")
    assert r.returncode == 1, said(r)
    assert f"{plain.secrets_db} cannot be read whole with the vault's key, which is the" in said(r)
    assert "Nothing was changed" in said(r)
    assert file_states(plain) == before and sorted(key_dir.iterdir()) == keys_before
