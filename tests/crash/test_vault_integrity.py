"""The vault's integrity check at start, through the real `pfar` command: a page damaged
in the middle of an encrypted sessions.db stops `pfar run` (the file and the finding
named, nothing written), `vault/last-check.json` keeps the finding, and the commands
that only read still show what can be read, or say clearly why not."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import pytest

from pfar import init_home
from pfar.vault.home import Home

from ..support import make_home, pfar, running_kernel, said, vault_db

pytestmark = pytest.mark.crash

PAGE = 4096  # SQLCipher's default page size, which pfar keeps


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A home with finished tasks, stopped cleanly: every page is in sessions.db."""
    home = make_home(tmp_path_factory.mktemp("populated") / "home", examples=True)
    with running_kernel(home):
        for i in range(4):
            r = pfar(home, "submit", "note", f"note {i}", "--wait")
            assert r.returncode == 0, said(r)
    for leftover in home.root.glob("kernel-*.out"):
        leftover.unlink()
    return home


@pytest.fixture
def home(populated: Home, tmp_path: Path) -> Home:
    import shutil

    shutil.copytree(populated.root, tmp_path / "home")
    return Home(tmp_path / "home")


def _root_page(home: Home, table: str) -> int:
    with contextlib.closing(vault_db(home)) as conn:
        assert int(conn.execute("PRAGMA page_size").fetchone()[0]) == PAGE
        (page,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    wal = Path(f"{home.sessions_db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # every page is in the file
    return int(page)


def _damage(home: Home, page: int) -> None:
    """Overwrite bytes in the middle of `page` of the encrypted file, as a bad disk
    would: the page no longer matches its HMAC."""
    with open(home.sessions_db, "r+b") as f:
        f.seek((page - 1) * PAGE + PAGE // 2)
        f.write(bytes(range(64)))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _last_check(home: Home) -> dict[str, object]:
    return dict(json.loads((home.vault_dir / "last-check.json").read_text()))


def test_a_healthy_start_checks_every_file_and_keeps_the_result(home: Home) -> None:
    with running_kernel(home):
        pass
    check = _last_check(home)
    assert check["ok"] is True
    files = check["files"]
    assert isinstance(files, dict)
    assert set(files) == {"sessions.db", "secrets.db", "memory.db"}
    for found in files.values():
        assert found["ok"] is True and found["findings"] == []
        assert found["checks"] == ["quick_check", "cipher_integrity_check"]


def test_a_plain_vault_is_checked_with_quick_check(tmp_path: Path) -> None:
    home = Home(tmp_path / "plain")
    init_home(home, encryption="none")
    with running_kernel(home):
        pass
    files = _last_check(home)["files"]
    assert isinstance(files, dict)
    assert files["sessions.db"]["checks"] == ["quick_check"]


def test_a_damaged_page_of_a_table_tasks_do_not_list_stops_run_but_not_tasks(
    home: Home,
) -> None:
    listed = pfar(home, "tasks", "--json")
    assert listed.returncode == 0, said(listed)
    page = _root_page(home, "bus_events")
    _damage(home, page)
    before = _sha(home.sessions_db)

    r = pfar(home, "run", "--no-stdin")
    text = said(r)
    assert r.returncode != 0, text
    assert "Traceback" not in text, text
    assert f"{home.sessions_db} is damaged" in text, text
    assert f"HMAC verification failed for page {page}" in text, text
    assert "(bus_events)" in text, text  # quick_check's finding, with its table named
    assert "wrote nothing to the vault" in text and "restore it from a backup" in text, text
    assert "pfar kernel running" not in text
    assert _sha(home.sessions_db) == before

    check = _last_check(home)
    assert check["ok"] is False
    sessions = check["files"]["sessions.db"]  # type: ignore[index]
    assert sessions["ok"] is False
    assert (
        f"cipher_integrity_check: HMAC verification failed for page {page}"
        in (sessions["findings"])
    )

    # what can be read still is: the task list does not touch the damaged page
    again = pfar(home, "tasks", "--json")
    assert again.returncode == 0, said(again)
    assert json.loads(again.stdout) == json.loads(listed.stdout)
    r = pfar(home, "vault", "check")
    assert r.returncode != 0 and "sessions.db: DAMAGED" in said(r), said(r)
    assert _sha(home.sessions_db) == before


def test_a_damaged_page_of_the_task_table_stops_run_and_tasks_says_why(home: Home) -> None:
    page = _root_page(home, "task_journal")
    _damage(home, page)
    before = _sha(home.sessions_db)

    r = pfar(home, "run", "--no-stdin")
    assert r.returncode != 0, said(r)
    assert f"{home.sessions_db} is damaged" in said(r), said(r)
    assert "(task_journal)" in said(r), said(r)

    r = pfar(home, "tasks")
    text = said(r)
    assert r.returncode != 0, text
    assert f"{home.sessions_db} is damaged" in text, text
    assert "Traceback" not in text, text
    assert _sha(home.sessions_db) == before
