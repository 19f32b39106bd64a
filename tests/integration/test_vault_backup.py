"""Backups and restore through the real `pfar` command on real files, with the kernel as
a real subprocess: a backup made while tasks run is whole and consistent; a restore on
"another machine" (another key directory) with the exported key shows the tasks as of
the backup; a newer vault is not replaced without --force, and the refusal names what
would be lost; a damaged backup is refused before the home is touched; a separate
backup key works where the vault key alone cannot open the backup; scheduled backups
keep the newest N; and no backup file holds a secret in the clear."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.driver import sqlite
from pfar.vault.home import Home

from ..support import make_home, owner_messages, running_kernel, said, vault_db, wait_for

pytestmark = pytest.mark.crash  # kernels run as subprocesses

CANARY = "sk-canary-7f3a9c2e5b1d4086a2f4c6e8b0d2f4a6"

SLOW_TEMPLATE = 'id = "slow"\nallowed_tools = ["shell.run"]\n'
_STEP = '{ tool = "shell.run", args = { argv = ["sh", "-c", "%s"] } }'
GATE_STEP = 5  # a slow task's step that waits for the gate file (when there is one)


def _script(gate: Path | None) -> str:
    steps = []
    for i in range(12):
        wait = f"while [ ! -e {gate} ]; do sleep 0.05; done; " if gate and i == GATE_STEP else ""
        steps.append(_STEP % f"{wait}echo {i}")
    plan = f"json = {{ steps = [ {', '.join(steps)} ] }}"
    return f'[[responses]]\ntemplate = "slow"\nphase = "plan"\n{plan}\n'


def _home(root: Path, config: str | None = None, gate: Path | None = None) -> Home:
    home = make_home(root, templates={"slow": SLOW_TEMPLATE}, examples=True, config=config)
    with open(home.root / "scripts" / "default.toml", "a") as f:
        f.write("\n" + _script(gate))
    return home


def run(
    home: Home | Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`pfar --home HOME ARGS...` as a real process, with `env` over this one's."""
    root = home.root if isinstance(home, Home) else home
    full = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", **(env or {})}
    full.pop("PFAR_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(root), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, said(proc)
    return proc


def submit(home: Home, template: str, text: str, *, wait: bool = False) -> str:
    r = ok(run(home, "submit", template, text, "--json", *(["--wait"] if wait else [])))
    return str(json.loads(r.stdout)["task_id"])


def task_ids(home: Home, env: dict[str, str] | None = None) -> dict[str, str]:
    rows = json.loads(ok(run(home, "tasks", "--json", env=env)).stdout)
    return {row["task_id"]: row["state"] for row in rows}


def manifest(backup: Path) -> dict[str, Any]:
    return json.loads((backup / "manifest.json").read_text())  # type: ignore[no-any-return]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` by its sha256: to show that nothing in it changed (but
    the lock file, which holds the pid of the last process that took the lock)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "kernel.lock"
    }


def open_with(path: Path, key_hex: str | None) -> sqlite.Connection:
    conn = sqlite.connect(f"file:{path}?mode=ro", uri=True)
    if key_hex is not None:
        conn.execute(f"PRAGMA key = \"x'{key_hex}'\"")
    return conn


def key_hex(home: Home) -> str:
    """The vault's key, as `pfar vault key export -` writes it into a pipe."""
    return ok(run(home, "vault", "key", "export", "-")).stdout.strip()


# -- a backup while a kernel runs ------------------------------------------------------


def test_a_backup_made_while_a_kernel_runs_tasks_is_whole_and_consistent(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    home = _home(tmp_path / "home", gate=gate)
    backups = tmp_path / "backups"
    with running_kernel(home):
        ids = [submit(home, "slow", f"task {i}") for i in range(4)]

        def at_the_gate() -> bool:
            rows = json.loads(ok(run(home, "tasks", "--json")).stdout)
            return len(rows) == 4 and all(r["current_step"] == f"{GATE_STEP}/12" for r in rows)

        wait_for(at_the_gate, 60, "the tasks at the gate")
        made = [json.loads(ok(run(home, "vault", "backup", str(backups / "b0"), "--json")).stdout)]
        gate.touch()
        for n in (1, 2):  # while the tasks move on
            r = ok(run(home, "vault", "backup", str(backups / f"b{n}"), "--json"))
            made.append(json.loads(r.stdout))
        wait_for(lambda: all(task_ids(home).get(t) == "Completed" for t in ids), 60, "the tasks")
    with contextlib.closing(vault_db(home)) as conn:
        final = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='bus_events'").fetchone()
    # the kernel went on writing while the backups were made: the first saw them mid-way
    assert made[0]["position"] < final[0]
    assert made[0]["tasks"] == {"Executing": 4}
    key = key_hex(home)
    for n, m in enumerate(made):
        b = backups / f"b{n}"
        assert sorted(p.name for p in b.iterdir()) == [
            "manifest.json",
            "memory.db",
            "secrets.db",
            "sessions.db",
            "unlock.json",
        ]
        assert m == manifest(b)
        for name, entry in m["files"].items():
            assert hashlib.sha256((b / name).read_bytes()).hexdigest() == entry["sha256"]
        with contextlib.closing(open_with(b / "sessions.db", key)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='bus_events'")
            assert seq.fetchone()[0] == m["position"]
            # the bus and the tasks are of one moment: no event of a task the backup lacks
            orphans = conn.execute(
                "SELECT count(*) FROM bus_events WHERE task_id IS NOT NULL AND task_id "
                "NOT IN (SELECT task_id FROM task_journal)"
            ).fetchone()[0]
            assert orphans == 0
            counts = dict(conn.execute("SELECT state, count(*) FROM task_journal GROUP BY state"))
            assert counts == m["tasks"]
    last = json.loads((home.vault_dir / "last-backup.json").read_text())
    assert last == {
        "at": made[-1]["made_at"],
        "dest": str(backups / "b2"),
        "position": made[-1]["position"],
    }

    # the mid-run backup restores, and a kernel recovers its tasks as of it: each was at
    # a write in doubt (a command running), which the owner is asked about, then ends
    r = run(home, "vault", "restore", str(backups / "b0"))
    assert r.returncode == 1 and "newer than the backup" in said(r), said(r)
    ok(run(home, "vault", "restore", str(backups / "b0"), "--force"))
    with running_kernel(home):
        asked = wait_for(
            lambda: (
                [
                    a["approval_id"]
                    for a in json.loads(ok(run(home, "approvals", "--json")).stdout)["approvals"]
                    if a["task_id"] in ids
                ]
                if set(task_ids(home).values()) == {"AwaitingApproval"}
                else None
            ),
            what="the owner asked about each write in doubt",
        )
        assert len(asked) == 4
        for approval in asked:
            ok(run(home, "approve", approval))
        wait_for(
            lambda: all(task_ids(home).get(t) == "Completed" for t in ids), 60, "recovered tasks"
        )


def test_a_backup_never_overwrites_and_leaves_nothing_half_made(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    dest = tmp_path / "b"
    dest.mkdir()
    (dest / "mine.txt").write_text("the owner's")
    r = run(home, "vault", "backup", str(dest))
    assert r.returncode == 1 and "exists" in said(r) and "never overwrites" in said(r), said(r)
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]
    inside = run(home, "vault", "backup", str(home.vault_dir / "b"))
    assert inside.returncode == 1 and "inside the vault directory" in said(inside)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "home"]  # no .partial left


# -- another machine ---------------------------------------------------------------------


def test_a_backup_restored_on_another_machine_with_the_exported_key(tmp_path: Path) -> None:
    keys_a, keys_b = tmp_path / "keys-a", tmp_path / "keys-b"
    a = {"PFAR_KEY_DIR": str(keys_a)}
    b = {"PFAR_KEY_DIR": str(keys_b)}
    home_a = tmp_path / "a"
    ok(run(home_a, "init", env=a))
    ok(run(home_a, "secret", "set", "canary", stdin=CANARY + "\n", env=a))
    with running_kernel(Home(home_a), env=a):
        done = [
            json.loads(
                ok(run(home_a, "submit", "note", f"hi {i}", "--json", "--wait", env=a)).stdout
            )["task_id"]
            for i in range(2)
        ]
    backup = tmp_path / "backup"
    ok(run(home_a, "vault", "backup", str(backup), env=a))
    exported = tmp_path / "moved" / "vault.key"
    r = ok(run(home_a, "vault", "key", "export", str(exported), env=a))
    assert "owner-only" in r.stdout and CANARY not in said(r)
    assert exported.stat().st_mode & 0o777 == 0o600
    # machine A's key directory is not on machine B
    keys_a.rename(tmp_path / "keys-a-elsewhere")

    home_b = tmp_path / "b"
    ok(run(home_b, "init", env=b))
    without = run(home_b, "vault", "restore", str(backup), env=b)
    assert without.returncode == 1, said(without)
    assert "--key-file" in said(without) and "does not exist" in said(without)
    assert not list(home_b.glob("vault.before-restore-*"))

    r = ok(run(home_b, "vault", "restore", str(backup), "--key-file", str(exported), env=b))
    unlock = json.loads((home_b / "vault" / "unlock.json").read_text())
    stored = keys_b / f"{unlock['vault_id']}.key"
    assert unlock["key"] == {"kind": "file", "path": str(stored)}
    assert unlock["vault_id"] == manifest(backup)["vault_id"]
    assert stored.read_text().strip() == exported.read_text().strip()
    assert stored.stat().st_mode & 0o777 == 0o600
    assert f"stored in the key file {stored}" in said(r)
    # B's own fresh vault moved aside, untouched
    assert len(list(home_b.glob("vault.before-restore-*/sessions.db"))) == 1

    assert task_ids(Home(home_b), env=b) == {t: "Completed" for t in done}
    secrets = ok(run(home_b, "secret", "list", env=b))
    assert "canary" in secrets.stdout and CANARY not in said(secrets)
    restored = json.loads((home_b / "vault" / "restored.json").read_text())
    assert restored["backup"] == manifest(backup)
    assert restored["previous"] is None
    with running_kernel(Home(home_b), env=b):
        assert task_ids(Home(home_b), env=b) == {t: "Completed" for t in done}


def test_key_export_and_import(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    exported = tmp_path / "k"
    ok(run(home, "vault", "key", "export", str(exported)))
    again = run(home, "vault", "key", "export", str(exported))
    assert again.returncode == 1 and "never overwrites a key" in said(again)
    inside = run(home, "vault", "key", "export", str(home.root / "k"))
    assert inside.returncode == 1 and "inside the home" in said(inside)
    piped = ok(run(home, "vault", "key", "export", "-")).stdout.strip()
    assert piped == exported.read_text().strip() and len(piped) == 64
    loose = tmp_path / "loose"
    with open(loose, "w") as f:
        os.chmod(loose, 0o644)
        r = subprocess.run(
            [sys.executable, "-m", "pfar", "--home", str(home.root), "vault", "key", "export", "-"],
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert r.returncode != 0 and "others can read" in r.stderr and loose.read_text() == ""

    # never onto a terminal
    leader, follower = pty.openpty()
    try:
        shown = subprocess.run(
            [sys.executable, "-m", "pfar", "--home", str(home.root), "vault", "key", "export", "-"],
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        os.close(follower)
        follower = -1
        on_screen = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(leader, 4096):
                on_screen += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert shown.returncode != 0 and "not shown on a terminal" in shown.stderr
    assert piped.encode() not in on_screen

    # the key file is lost: nothing opens; importing the exported key puts it back
    unlock = json.loads((home.vault_dir / "unlock.json").read_text())
    key_path = Path(unlock["key"]["path"])
    key_path.unlink()
    lost = run(home, "tasks")
    assert lost.returncode != 0 and "does not exist" in said(lost)
    imported = ok(run(home, "vault", "key", "import", str(exported)))
    assert f"now in the key file {key_path}" in said(imported)
    assert key_path.read_text().strip() == piped
    ok(run(home, "tasks"))
    assert "already in" in said(ok(run(home, "vault", "key", "import", str(exported))))

    other = _home(tmp_path / "other")
    wrong = tmp_path / "other.key"
    ok(run(other, "vault", "key", "export", str(wrong)))
    r = run(home, "vault", "key", "import", str(wrong))
    assert r.returncode == 1 and "not the key of vault" in said(r), said(r)
    assert key_path.read_text().strip() == piped


# -- refusing ----------------------------------------------------------------------------


def test_restore_refuses_a_newer_vault_and_names_what_would_be_lost(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    backup = tmp_path / "backup"
    with running_kernel(home):
        first = submit(home, "note", "before", wait=True)
        ok(run(home, "vault", "backup", str(backup)))
        later = submit(home, "note", "after", wait=True)
        running = run(home, "vault", "restore", str(backup), "--force")
        assert running.returncode == 1 and "a kernel is running" in said(running)
    before = tree_digest(home.vault_dir)
    r = run(home, "vault", "restore", str(backup))
    text = said(r)
    assert r.returncode == 1, text
    m = manifest(backup)
    assert "newer than the backup" in text
    assert f"the backup's at {m['position']}" in text
    assert later[:8] in text and first[:8] not in text.split("does not have")[1]
    assert "1 Completed" in text and "2 Completed" in text  # the backup's, and now
    assert "--force" in text
    assert tree_digest(home.vault_dir) == before
    assert not list(home.root.glob("vault.before-restore-*"))

    r = ok(run(home, "vault", "restore", str(backup), "--force"))
    assert task_ids(home) == {first: "Completed"}
    [aside] = list(home.root.glob("vault.before-restore-*"))
    assert tree_digest(aside) == before  # the replaced vault, whole, kept
    restored = json.loads((home.vault_dir / "restored.json").read_text())
    assert restored["replaced"]["position"] > m["position"]
    assert restored["moved_aside"] == str(aside)
    # the restore is in the audit log, whose chain it continues
    ok(run(home, "audit", "verify"))
    shown = ok(run(home, "audit", "show", "--event", "vault_restored", "--json")).stdout
    [record] = [json.loads(line) for line in shown.splitlines()]
    assert record["position"] == m["position"] and record["moved_aside"] == str(aside)


def test_restore_moves_the_acknowledged_record_aside_and_keeps_it(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    backup = tmp_path / "backup"
    ok(run(home, "vault", "backup", str(backup)))
    record = {"position": 0, "chain_head": "abc"}
    (home.vault_dir / "acknowledged").write_text(json.dumps(record))
    ok(run(home, "vault", "restore", str(backup)))
    assert not (home.vault_dir / "acknowledged").exists()
    restored = json.loads((home.vault_dir / "restored.json").read_text())
    assert restored["previous"] == record
    [aside] = list(home.root.glob("vault.before-restore-*"))
    assert json.loads((aside / "acknowledged").read_text()) == record


def test_a_damaged_backup_is_refused_before_the_home_is_touched(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    with running_kernel(home):
        submit(home, "note", "something", wait=True)
    backup = tmp_path / "backup"
    ok(run(home, "vault", "backup", str(backup)))
    before = tree_digest(home.root)
    pristine = tmp_path / "pristine"
    shutil.copytree(backup, pristine)

    def flip(path: Path, at: int) -> None:
        data = bytearray(path.read_bytes())
        data[at] ^= 0x01
        path.write_bytes(bytes(data))

    target = backup / "sessions.db"
    flip(target, target.stat().st_size // 2)
    r = run(home, "vault", "restore", str(backup), "--force")
    assert r.returncode == 1 and f"{target} is not the file the backup made" in said(r), said(r)
    assert tree_digest(home.root) == before
    assert sorted(p.name for p in home.root.iterdir()) == sorted(
        p.name for p in home.root.iterdir() if not p.name.startswith((".vault", "vault."))
    )

    # the same flip with the manifest's hash made to match: the page check finds it
    m = manifest(backup)
    m["files"]["sessions.db"]["sha256"] = hashlib.sha256(target.read_bytes()).hexdigest()
    (backup / "manifest.json").write_text(json.dumps(m))
    r = run(home, "vault", "restore", str(backup), "--force")
    assert r.returncode == 1 and "sessions.db" in said(r) and "nothing was restored" in said(r)
    assert "Traceback" not in said(r)
    assert tree_digest(home.root) == before

    # a file missing, and a directory that is no backup
    (pristine / "secrets.db").unlink()
    r = run(home, "vault", "restore", str(pristine), "--force")
    assert r.returncode == 1 and "secrets.db is missing" in said(r), said(r)
    r = run(home, "vault", "restore", str(tmp_path), "--force")
    assert r.returncode == 1 and "no manifest.json" in said(r), said(r)
    assert tree_digest(home.root) == before


# -- a separate backup key -----------------------------------------------------------------


def test_a_separate_backup_key(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    ok(run(home, "secret", "set", "canary", stdin=CANARY + "\n"))
    with running_kernel(home):
        done = submit(home, "note", "kept", wait=True)
    backup_key = tmp_path / "backup.key"
    ok(run(home, "vault", "key", "new", str(backup_key)))
    assert backup_key.stat().st_mode & 0o777 == 0o600
    backup = tmp_path / "backup"
    r = ok(run(home, "vault", "backup", str(backup), "--backup-key-file", str(backup_key)))
    assert "backup key" in r.stdout
    m = manifest(backup)
    assert m["encryption"] == "backup-key" and m["backup_key_check"]
    vault_key = key_hex(home)
    for name in ("sessions.db", "secrets.db", "memory.db"):
        data = (backup / name).read_bytes()
        assert not data.startswith(b"SQLite format 3")
        with (
            contextlib.closing(open_with(backup / name, vault_key)) as conn,
            pytest.raises(sqlite.DatabaseError, match="not a database"),
        ):
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        with contextlib.closing(open_with(backup / name, backup_key.read_text().strip())) as conn:
            assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]

    with running_kernel(home):
        submit(home, "note", "lost", wait=True)
    exported = tmp_path / "vault.key"
    ok(run(home, "vault", "key", "export", str(exported)))
    without = run(home, "vault", "restore", str(backup), "--force")
    assert without.returncode == 1 and "--backup-key-file" in said(without)
    wrong = run(
        home, "vault", "restore", str(backup), "--force", "--backup-key-file", str(exported)
    )
    assert wrong.returncode == 1 and "is not the backup key" in said(wrong), said(wrong)
    ok(run(home, "vault", "restore", str(backup), "--force", "--backup-key-file", str(backup_key)))
    # restored under the vault's own key: the backup key is not needed to run it
    assert task_ids(home) == {done: "Completed"}
    assert "canary" in ok(run(home, "secret", "list")).stdout
    with contextlib.closing(open_with(home.sessions_db, vault_key)) as conn:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]


# -- no secret in the clear ------------------------------------------------------------------


def test_no_backup_file_holds_a_secret_in_the_clear(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    ok(run(home, "secret", "set", "canary", stdin=CANARY + "\n"))
    backup_key = tmp_path / "backup.key"
    ok(run(home, "vault", "key", "new", str(backup_key)))
    outputs = [
        ok(run(home, "vault", "backup", str(tmp_path / "b1"))),
        ok(
            run(home, "vault", "backup", str(tmp_path / "b2"), "--backup-key-file", str(backup_key))
        ),
    ]
    for b in ("b1", "b2"):
        files = list((tmp_path / b).iterdir())
        assert len(files) == 5
        for f in files:
            assert CANARY.encode() not in f.read_bytes(), f
    assert all(CANARY not in said(o) for o in outputs)
    assert CANARY.encode() not in (home.vault_dir / "last-backup.json").read_bytes()

    # the same look finds it in a plain vault's backup, which says it is not encrypted
    plain = tmp_path / "plain"
    ok(run(plain, "init", "--no-encrypt"))
    ok(run(plain, "secret", "set", "canary", stdin=CANARY + "\n"))
    r = ok(run(plain, "vault", "backup", str(tmp_path / "b3")))
    assert "NOT encrypted" in said(r)
    assert manifest(tmp_path / "b3")["encryption"] == "none"
    assert CANARY.encode() in (tmp_path / "b3" / "secrets.db").read_bytes()
    assert not (tmp_path / "b3" / "unlock.json").exists()


# -- scheduled backups -------------------------------------------------------------------------


def _audit(home: Home, event: str) -> list[dict[str, Any]]:
    if not home.audit_log.exists():
        return []
    records = [json.loads(line) for line in home.audit_log.read_text().splitlines() if line]
    return [r for r in records if r["event"] == event]


def test_scheduled_backups_keep_the_newest_n(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    home = _home(
        tmp_path / "home",
        config=f'[vault.backup]\ndir = "{backups}"\nevery_hours = 0.001\nkeep = 2\n',
    )
    backups.mkdir()
    (backups / "mine").mkdir()  # the owner's: never touched
    (backups / "mine" / "notes.txt").write_text("mine")
    other = make_home(tmp_path / "other")  # another home's backup in the same directory
    ok(run(other, "vault", "backup", str(backups / "other-home")))
    with running_kernel(home):
        submit(home, "note", "one", wait=True)
        wait_for(lambda: len(_audit(home, "vault_backup")) >= 4, 90, "four scheduled backups")
    made = _audit(home, "vault_backup")
    kept = sorted(p.name for p in backups.iterdir() if (p / "manifest.json").exists())
    newest = sorted(Path(r["dest"]).name for r in made[-2:])
    assert kept == sorted([*newest, "other-home"]), (kept, made)
    assert (backups / "mine" / "notes.txt").read_text() == "mine"
    assert any(r["removed"] for r in made)
    for name in newest:
        assert manifest(backups / name)["home"] == str(home.root)
    last = json.loads((home.vault_dir / "last-backup.json").read_text())
    assert last["dest"] == made[-1]["dest"]


def test_a_failing_scheduled_backup_is_told_to_the_owner_once(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the backups would go")
    home = _home(
        tmp_path / "home",
        config=f'[vault.backup]\ndir = "{blocker}"\nevery_hours = 0.001\nkeep = 2\n',
    )
    with running_kernel(home) as kernel:
        wait_for(lambda: len(_audit(home, "vault_backup_failed")) >= 3, 90, "three failures")
        told = wait_for(
            lambda: [m for m in owner_messages(home) if "scheduled backup" in str(m)],
            what="the owner told",
        )
        assert kernel.proc.poll() is None  # a failing backup does not stop the kernel
    assert len([m for m in owner_messages(home) if "scheduled backup" in str(m)]) == 1
    assert str(blocker) in str(told[0])


def test_a_bad_backup_schedule_is_refused_at_start_with_its_key_named(tmp_path: Path) -> None:
    home = _home(tmp_path / "home", config='[vault.backup]\ndir = "b"\nevery_hours = 0\n')
    r = run(home, "run", "--no-stdin")
    assert r.returncode != 0 and "vault.backup.every_hours" in said(r), said(r)
