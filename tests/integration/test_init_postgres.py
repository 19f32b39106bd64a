"""`pfar init --postgres DSN` as an owner runs it: a home whose journal is on a server,
its password never in argv or config.toml, and each bad input refused with nothing
left behind."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from pfar.config import Config
from pfar.vault.home import Home

from ..pg_support import require_postgres, store_dsn
from ..support import pfar, running_kernel, said


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    require_postgres()
    return store_dsn(tmp_path / "db")


def test_a_home_on_postgresql_runs_without_a_journal_file(tmp_path: Path, dsn: str) -> None:
    home = Home(tmp_path / "home")
    made = pfar(home.root, "init", "--postgres", dsn, "--password-secret", "pg", stdin="s3cret\n")
    assert made.returncode == 0, said(made)
    assert not home.sessions_db.exists() and home.secrets_db.exists()
    config = Config.load(home.config).vault
    assert config.backend == "postgresql" and config.postgresql is not None
    assert config.postgresql.password_secret == "pg"
    assert "s3cret" not in home.config.read_text() and "s3cret" not in said(made)
    listed = pfar(home.root, "secret", "list")
    assert "pg" in said(listed) and "s3cret" not in said(listed)
    with psycopg.connect(dsn) as conn:  # the journal's tables are on the server
        assert conn.execute("SELECT count(*) FROM task_journal").fetchone() == (0,)
    with running_kernel(home):
        done = pfar(home.root, "submit", "note", "buy milk", "--wait")
        assert done.returncode == 0 and "Completed" in said(done), said(done)
    offline = pfar(home.root, "tasks")  # no kernel: read from the server
    assert offline.returncode == 0 and "Completed" in said(offline), said(offline)


def test_a_dsn_with_a_password_is_refused_and_not_repeated(tmp_path: Path, dsn: str) -> None:
    home = tmp_path / "home"
    bad = "postgresql://postgres:hunter2@127.0.0.1:5432/test"
    made = pfar(home, "init", "--postgres", bad)
    assert made.returncode != 0 and "holds a password" in said(made)
    assert "hunter2" not in said(made)
    assert not home.exists()


def test_an_unreachable_server_is_named_and_no_home_is_left(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = pfar(home, "init", "--postgres", "postgresql://pfar@127.0.0.1:9/nowhere")
    assert made.returncode != 0, said(made)
    assert "cannot connect to postgresql://pfar@127.0.0.1:9/nowhere" in said(made)
    assert not home.exists()


def test_a_database_that_holds_a_journal_is_refused(tmp_path: Path, dsn: str) -> None:
    first = pfar(tmp_path / "one", "init", "--postgres", dsn)
    assert first.returncode == 0, said(first)
    second = pfar(tmp_path / "two", "init", "--postgres", dsn)
    assert second.returncode != 0 and "already holds a pfar journal" in said(second)
    assert not (tmp_path / "two").exists()


def test_a_password_variable_that_is_not_set_is_named(tmp_path: Path, dsn: str) -> None:
    os.environ.pop("PFAR_TEST_UNSET_PG_PASSWORD", None)
    made = pfar(
        tmp_path / "home",
        "init",
        "--postgres",
        dsn,
        "--password-env",
        "PFAR_TEST_UNSET_PG_PASSWORD",
    )
    assert made.returncode != 0 and "PFAR_TEST_UNSET_PG_PASSWORD is not set" in said(made)
    assert not (tmp_path / "home").exists()
