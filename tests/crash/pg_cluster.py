"""A PostgreSQL cluster of a test's own, on a temporary data directory, to restart and
crash at will (the shared server of tests/pg_support.py is never touched).

It is made with the installed server's `initdb` and run with its `pg_ctl`; as root
(initdb refuses root), both run as the `postgres` system user, on a directory that
user owns. It listens on 127.0.0.1 on a free port, trusts local connections, and keeps
its socket in its own directory. Where no server is installed the test skips and says
why; under CI=true it fails.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest

SYSTEM_USER = "postgres"


def bindir() -> Path | None:
    """Where the installed server's programs are: pg_config's, or the newest of Debian's."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        path = Path(out.stdout.strip())
        if out.returncode == 0 and (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    versions = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    versions.sort(key=lambda b: int(b.parent.name) if b.parent.name.isdigit() else 0)
    return versions[-1] if versions else None


def _missing(why: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: PostgreSQL tests must run)")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    bindir: Path
    root: Path  # the temporary directory: the data directory and the socket are in it
    port: int
    as_user: list[str]  # the prefix that runs a program as the server's user (none: us)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def run(self, program: str, *args: str, timeout: float = 60) -> str:
        proc = subprocess.run(
            [*self.as_user, str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"{program} {' '.join(args)} failed ({proc.returncode}):\n"
                f"{proc.stdout}{proc.stderr}\n{self.server_log()}"
            )
        return proc.stdout + proc.stderr

    def ctl(self, *args: str, timeout: float = 60) -> str:
        return self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), *args, timeout=timeout)

    def start(self) -> None:
        self.ctl("start", "-w", "-t", "30")

    def restart(self, mode: str) -> None:
        """`pg_ctl restart -m MODE`: fast ends every session first; immediate is a crash
        (no checkpoint: the next start replays the WAL)."""
        self.ctl("restart", "-w", "-t", "30", "-m", mode)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the server; when pg_ctl cannot, kill its postmaster (ours: named by our
        data directory's postmaster.pid), whose children end with it."""
        try:
            self.ctl("stop", "-w", "-t", "20", "-m", "immediate", timeout=30)
            return
        except (AssertionError, subprocess.TimeoutExpired):
            pass
        pid = self.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def dsn(self, dbname: str) -> str:
        return f"postgresql://{SYSTEM_USER}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def wait_accepting(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no server log)"


@contextlib.contextmanager
def own_cluster() -> Iterator[Cluster]:
    """A fresh cluster, started; stopped (and its directory removed) at the end."""
    where = bindir()
    if where is None:
        _missing("no PostgreSQL server installed (no initdb in pg_config --bindir or /usr/lib)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="pfar-pg-"))
    try:
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                _missing("running as root, and no runuser to run initdb as the postgres user")
            try:
                shutil.chown(root, user=SYSTEM_USER, group=SYSTEM_USER)
            except (LookupError, OSError) as exc:
                _missing(f"running as root, and no {SYSTEM_USER} system user for initdb: {exc}")
            as_user = [str(runuser), "-u", SYSTEM_USER, "--"]
        cluster = Cluster(where, root, _free_port(), as_user)
        cluster.run(
            "initdb", "-D", str(cluster.data), "-U", SYSTEM_USER, "-A", "trust", "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip
        with (cluster.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {cluster.port}\n"
                f"unix_socket_directories = '{root}'\nmax_connections = 40\n"
                "shared_buffers = 16MB\n"
            )
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
