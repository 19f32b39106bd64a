"""A vault pfar cannot read or write, through the real `pfar` command: the message names
the file and says what is wrong (damaged, read-only, disk full), never advises a step
that throws data away, and no command prints a traceback or answers with rows missing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3 as stdlib_sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.keys import EncryptChoice

from ..support import make_home, running_kernel, vault_db, wait_for
from .test_bad_input import pfar, said

MANY_STEPS = 30  # enough rows that task_steps spans several leaf pages

MANY_TEMPLATE = 'id = "many"\nallowed_tools = ["shell.run"]\n'
STEP = '{ tool = "shell.run", args = { argv = ["sh", "-c", "echo %d; printf %%0200d 0"] } }'
MANY_SCRIPT = (
    '[[responses]]\ntemplate = "many"\nphase = "plan"\n'
    f"json = {{ steps = [ {', '.join(STEP % i for i in range(MANY_STEPS))} ] }}\n"
)


def _populate(root: Path, encryption: EncryptChoice) -> Home:
    """A home whose journal has completed tasks with many steps and a pending approval."""
    home = make_home(root, templates={"many": MANY_TEMPLATE}, examples=True, encryption=encryption)
    with open(home.root / "scripts" / "default.toml", "a") as f:
        f.write("\n" + MANY_SCRIPT)
    with running_kernel(home):
        for i in range(3):
            r = pfar(home, "submit", "many", f"task {i}", "--wait")
            assert r.returncode == 0, said(r)
        r = pfar(home, "submit", "run_command", "echo waiting")
        assert r.returncode == 0, said(r)
        wait_for(lambda: pfar(home, "approvals", "--json").stdout.count("approval_id"))
    for leftover in home.root.glob("kernel-*.out"):
        leftover.unlink()
    # The tests below damage bytes of the database file itself: every page must be in
    # it, none only in the write-ahead log (a kernel's own checkpoint at shutdown may
    # have been held back by a reader).
    with contextlib.closing(vault_db(home)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0, "the journal could not be checkpointed"
    return home


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """Plain: the tests below find rows by their bytes in the file, and damage a page's
    content without breaking its checksum (an encrypted page has neither)."""
    return _populate(tmp_path_factory.mktemp("populated") / "home", "none")


@pytest.fixture(scope="module")
def populated_encrypted(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return _populate(tmp_path_factory.mktemp("populated-encrypted") / "home", "auto")


@pytest.fixture
def home(populated: Home, tmp_path: Path) -> Home:
    shutil.copytree(populated.root, tmp_path / "home")
    return Home(tmp_path / "home")


@pytest.fixture
def encrypted_home(populated_encrypted: Home, tmp_path: Path) -> Home:
    shutil.copytree(populated_encrypted.root, tmp_path / "home")
    return Home(tmp_path / "home")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pages(db: Path, table: str) -> list[int]:
    """Leaf pages of `table` in a plain vault file, from SQLite's dbstat table (which
    the standard library's SQLite has, and pfar's SQLCipher build does not)."""
    with contextlib.closing(stdlib_sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,),
        ).fetchall()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert rows, f"{table} has no leaf page"
    return [(r[0] - 1) * page_size for r in rows]


def _ids(home: Home, table: str, column: str) -> list[str]:
    with contextlib.closing(vault_db(home)) as conn:
        return [r[0] for r in conn.execute(f"SELECT {column} FROM {table} ORDER BY created_at")]


def _refused(r: subprocess.CompletedProcess[str], path: Path, what: str) -> None:
    text = said(r)
    assert r.returncode != 0, text
    assert str(path) in text, text
    assert what in text, text
    assert "Traceback" not in text, text
    for bad_advice in ("pfar init", "move it aside", "delete it", "rm "):
        assert bad_advice not in text, text


# -- damaged pages ---------------------------------------------------------------------


def _page_holding(db: Path, table: str, key: str) -> int:
    """The offset of the leaf page of `table` that holds the row with `key` in it."""
    data = db.read_bytes()
    for offset in _pages(db, table):
        if data.find(key.encode(), offset, offset + 4096) >= 0:
            return offset
    raise AssertionError(f"no leaf page of {table} holds {key}")


@pytest.mark.parametrize(
    ("table", "commands"),
    [
        ("task_journal", [("tasks",), ("tasks", "--json"), ("task", "show"), ("recover",)]),
        ("pending_approvals", [("approvals",), ("approvals", "--json"), ("task", "show")]),
    ],
)
def test_a_damaged_page_is_reported_by_every_command(
    home: Home, table: str, commands: list[tuple[str, ...]]
) -> None:
    waiting = _ids(home, "task_journal", "task_id")[-1]  # the task waiting for approval
    offset = _page_holding(home.sessions_db, table, waiting)
    with open(home.sessions_db, "r+b") as f:  # garbage over the whole page
        f.seek(offset)
        f.write(bytes(range(256)) * 16)
    before = _sha(home.sessions_db)
    for command in commands:
        args = {("task", "show"): ("task", "show", waiting), ("recover",): ("recover", "--dry-run")}
        r = pfar(home, *args.get(command, command))
        _refused(r, home.sessions_db, "is damaged (database disk image is malformed)")
        assert "keep a copy" in said(r) and ".recover" in said(r), said(r)
    assert _sha(home.sessions_db) == before  # read-only commands changed nothing
    r = pfar(home, "run", "--no-stdin", timeout=60)
    _refused(r, home.sessions_db, "is damaged")


def test_a_damaged_page_of_an_encrypted_vault_is_reported_by_every_command(
    encrypted_home: Home,
) -> None:
    # SQLCipher keeps a checksum (an HMAC) on every page: any change to a page is found
    # the first time it is read, and told from a wrong key by the key's check value
    home = encrypted_home
    waiting = _ids(home, "task_journal", "task_id")[-1]
    with contextlib.closing(vault_db(home)) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'task_journal'"
        ).fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    # the table's root page: every read of the table goes through it
    offset = (int(root) - 1) * int(page_size)
    assert keys.read_unlock(home.vault_dir) is not None
    with open(home.sessions_db, "r+b") as f:
        f.seek(offset + 100)
        byte = f.read(1)
        f.seek(offset + 100)
        f.write(bytes([byte[0] ^ 0x01]))  # one bit
    before = _sha(home.sessions_db)
    for args in (("tasks",), ("tasks", "--json"), ("task", "show", waiting)):
        r = pfar(home, *args)
        _refused(r, home.sessions_db, "is damaged")
        assert "keep a copy" in said(r), said(r)
        assert "hmac" not in said(r).lower(), said(r)  # SQLCipher's own log stays off
    assert _sha(home.sessions_db) == before
    r = pfar(home, "run", "--no-stdin", timeout=60)
    _refused(r, home.sessions_db, "is damaged")
    assert _sha(home.sessions_db) == before  # the start-up check stops it before any write


def test_steps_hidden_by_a_damaged_page_are_reported_not_dropped(home: Home) -> None:
    # the tasks that ran all their steps (by their steps, not by creation time: two
    # tasks created in the same instant come back in any order)
    with contextlib.closing(vault_db(home)) as conn:
        task_ids = [
            r[0]
            for r in conn.execute(
                "SELECT task_id FROM task_steps GROUP BY task_id HAVING count(*) = ? "
                "ORDER BY task_id",
                (MANY_STEPS,),
            )
        ]
    assert len(task_ids) >= 2, task_ids
    victim = task_ids[1]
    # Overwrite one byte of the task id inside a step row: the page still parses, but
    # rows it holds are no longer found by the task's key, and SQLite says nothing.
    # Before, `task show` answered with fewer steps than the task ran, and no error.
    original = home.sessions_db.read_bytes()
    hits = [
        p + m.start()
        for p in _pages(home.sessions_db, "task_steps")
        for m in re.finditer(re.escape(victim.encode()), original[p : p + 4096])
    ]
    for hit in hits:
        data = bytearray(original)
        data[hit + 5] ^= 0x20
        home.sessions_db.write_bytes(bytes(data))
        with contextlib.closing(vault_db(home)) as conn:
            seen = conn.execute(
                "SELECT count(*) FROM task_steps WHERE task_id = ?", (victim,)
            ).fetchone()[0]
        if seen < MANY_STEPS:  # plain SQLite now silently returns a short list
            break
    else:
        pytest.fail("no single-byte change hid a step row")
    before = _sha(home.sessions_db)
    for args in (("task", "show", victim), ("task", "show", victim, "--json")):
        r = pfar(home, *args)
        _refused(r, home.sessions_db, "is damaged (table task_steps:")
    # the other tasks' steps are all there
    r = pfar(home, "task", "show", task_ids[0], "--json")
    assert r.returncode == 0, said(r)
    assert len(json.loads(r.stdout)["steps"]) == MANY_STEPS
    assert _sha(home.sessions_db) == before


# -- a vault pfar cannot write -----------------------------------------------------------


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make `path` read-only for this process's user. chmod does not stop root, so as
    root the immutable attribute is used (ext4 and most local filesystems)."""
    if os.geteuid() != 0:
        old = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(old)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: cannot make a file read-only to root")
    made = subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"running as root and `chattr +i` failed here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize(
    ("target", "culprit_named"),
    [
        ("vault", "its directory {vault} is read-only"),
        ("vault/sessions.db", "{path} is read-only"),
        ("vault/secrets.db", "{path} is read-only"),
    ],
)
def test_a_read_only_vault_is_not_called_corrupt(
    home: Home, target: str, culprit_named: str
) -> None:
    path = home.root / target
    before = {p.name: _sha(p) for p in home.vault_dir.glob("*.db")}
    commands: list[tuple[tuple[str, ...], str | None, Path]] = [
        (("run", "--no-stdin"), None, path if path.is_file() else home.sessions_db)
    ]
    if target != "vault/sessions.db":  # `secret set` writes secrets.db only
        commands.append((("secret", "set", "token"), "a-secret-value\n", home.secrets_db))
    with read_only(path):
        for args, stdin, db in commands:
            r = pfar(home, *args, stdin=stdin, timeout=60)
            assert r.returncode == 1, said(r)
            _refused(r, db, f"pfar cannot write {db}")
            assert culprit_named.format(vault=home.vault_dir, path=path) in said(r), said(r)
            assert "not damaged" in said(r)
            assert "not a readable" not in said(r)
    assert {p.name: _sha(p) for p in home.vault_dir.glob("*.db")} == before
    with running_kernel(home):  # and once it is writable again, all is well
        pass


def test_a_full_disk_is_named_not_called_corrupt(tmp_path: Path) -> None:
    """A small tmpfs, filled up. Needs root (mount); skipped elsewhere."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem to fill needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mnt)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        home = make_home(mnt / "home")
        filler = mnt / "filler"
        with open(filler, "wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
        r = pfar(home, "secret", "set", "token", stdin="a-secret-value\n")
        _refused(r, home.secrets_db, "is full")
        assert "not damaged" in said(r)
        filler.unlink()
        r = pfar(home, "secret", "set", "token", stdin="a-secret-value\n")
        assert r.returncode == 0, said(r)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
