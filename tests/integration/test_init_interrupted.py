"""`pfar init` killed part-way (SIGKILL at each of its points): the next `pfar init`
finishes the home and a kernel runs on it; nothing is left half-made."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import running_kernel
from .test_bad_input import pfar, said


def _init_killed_at(root: Path, point: str) -> None:
    env = {**os.environ, "PFAR_FAULT": f"init:{point}"}
    env.pop("PFAR_HOME", None)
    r = subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(root), "init"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    assert f"fault hook: SIGKILL after init:{point}" in r.stderr


def _works(root: Path) -> None:
    home = Home(root)
    for db in (home.sessions_db, home.secrets_db, home.memory_db):
        assert db.is_file(), db
    with running_kernel(home):
        r = pfar(home, "submit", "note", "buy milk", "--wait", "--json")
        assert r.returncode == 0, said(r)
        assert '"state": "Completed"' in r.stdout, r.stdout
    assert not list(root.parent.glob(f".{root.name}.init-*")), "staging left behind"


@pytest.mark.crash
@pytest.mark.parametrize("point", ["staged", "vault_created", "synced"])
def test_init_killed_before_the_home_exists(tmp_path: Path, point: str) -> None:
    root = tmp_path / "home"
    _init_killed_at(root, point)
    assert not root.exists()  # all or nothing: the home was never half there
    assert list(tmp_path.glob(".home.init-*"))  # the killed init's staging directory
    r = pfar(root, "run", "--no-stdin")
    assert r.returncode == 1 and "run `pfar init`" in said(r), said(r)
    again = pfar(root, "init")
    assert again.returncode == 0, said(again)
    _works(root)


@pytest.mark.crash
@pytest.mark.parametrize("point", ["staged", "synced", "moved"])
def test_init_killed_in_an_existing_directory(tmp_path: Path, point: str) -> None:
    root = tmp_path / "home"
    root.mkdir()
    mine = root / "notes.txt"  # something the owner already keeps there
    mine.write_text("mine\n")
    _init_killed_at(root, point)
    assert not (root / "vault" / "sessions.db").exists()  # the vault goes in last
    again = pfar(root, "init")
    assert again.returncode == 0, said(again)
    assert mine.read_text() == "mine\n"
    _works(root)


def test_init_completes_a_home_an_older_init_left_without_a_vault(tmp_path: Path) -> None:
    root = tmp_path / "home"
    (root / "templates").mkdir(parents=True)
    (root / "vault").mkdir()
    edited = '# my settings\n[vault]\nsynchronous = "FULL"\n'
    (root / "config.toml").write_text(edited)
    r = pfar(root, "init")
    assert r.returncode == 0, said(r)
    assert (root / "config.toml").read_text() == edited  # kept, not overwritten
    assert f"created {root / 'config.toml'}" not in said(r)
    _works(root)
    again = pfar(root, "init")  # and now it is a home: init refuses to touch it
    assert again.returncode == 1 and "already has a vault" in said(again)
