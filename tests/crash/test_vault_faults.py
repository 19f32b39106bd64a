"""Failure, not corruption: a disk that fills up, a file system that turns read-only and
one whose writes fail with EIO, each under a running kernel with an encrypted vault.
The kernel stops (fail-stop, exit 3) with a message that names the file and the error,
after telling the owner on a channel that still works (Telegram, against a loopback
Bot API server); once the owner frees space, repairs the file system or moves the home
off the failing disk, the next start has every task it acknowledged, and every vault
file passes SQLite's and SQLCipher's integrity checks.

The disks are real (disk_faults.py): they need root, and skip elsewhere (fail under
CI=true).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..integration.telegram_server import OWNER, TOKEN, BotApi, unescape
from ..support import KernelProcess, db, make_home, pfar, running_kernel, vault_db, wait_for
from .disk_faults import ext4_on_loop, fill, remount, tmpfs

pytestmark = pytest.mark.crash

SCRIPT = '[[turns]]\ntext = "noted"\n'
FAIL_STOP = 3  # the exit code of a kernel that stopped on a failed write
STOPPING = "pfar: stopping without a clean shutdown (fail-stop):"


@pytest.fixture
def api() -> Iterator[BotApi]:
    server = BotApi()
    yield server
    server.close()


def _home(root: Path, api: BotApi, work: Path, vault: str = "") -> Home:
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.telegram]
owner_user_id = {OWNER}
api_url = "{api.url}"
poll_timeout_seconds = 1
[loop]
tools = ["Read"]
{vault}
"""
    home = make_home(root, config=config, script=SCRIPT)
    done = pfar(home, "secret", "set", "telegram_bot_token", stdin=TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    return home


@dataclass
class Stopped:
    code: int
    output: str  # the kernel's stdout and stderr, kept off the failing disk
    acked: list[str]  # the tasks the kernel acknowledged (their ids), before and after


def _run_until_it_fails(home: Home, api: BotApi, out: Path, fail: Callable[[], None]) -> Stopped:
    """A kernel that takes loop tasks; `fail` breaks its disk; tasks go on being
    submitted until the kernel stops."""
    work = out / "work"
    work.mkdir(exist_ok=True)
    k = KernelProcess(home, out_dir=out)
    acked: list[str] = []

    def submit(n: int) -> None:
        with contextlib.suppress(Exception):  # refused: not acknowledged
            made = k.request("loop", prompt=f"look {n} " + "x" * 2000, directory=str(work))
            acked.append(made["task_id"])

    try:
        k.wait_ready()
        wait_for(  # the channel is connected: it polls from its saved offset
            lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
            what="the Telegram channel polling",
        )
        for n in range(3):
            submit(n)
        assert len(acked) == 3, k.output()
        fail()
        for n in range(3, 500):  # until a commit needs what the disk cannot give
            if k.proc.poll() is not None:
                break
            submit(n)
        code = k.wait_exit(timeout=60)
    finally:
        if k.proc.poll() is None:
            k.kill()
    return Stopped(code, k.output(), acked)


def _told_on_telegram(api: BotApi, home: Home) -> str:
    told = [unescape(s.text) for s in api.sent]
    found = [t for t in told if t.startswith("pfar has stopped (fail-stop)")]
    assert len(found) == 1, told
    assert f"pfar cannot write {home.sessions_db}" in found[0], found[0]
    return found[0]


def _nothing_lost(home: Home, acked: list[str], out: Path) -> None:
    """The next start runs, has every acknowledged task, and the vault is whole."""
    with running_kernel(home, out_dir=out) as k:
        assert k.request("ping")
    with contextlib.closing(db(home)) as conn:
        stored = {r["task_id"] for r in conn.execute("SELECT task_id FROM task_journal")}
    assert set(acked) <= stored, set(acked) - stored
    for path in (home.sessions_db, home.secrets_db, home.memory_db):
        with contextlib.closing(vault_db(home, path)) as conn:
            assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)], path
            assert conn.execute("PRAGMA cipher_integrity_check").fetchall() == [], path


def test_a_full_disk_stops_the_kernel_and_freeing_space_loses_nothing(
    tmp_path: Path, api: BotApi
) -> None:
    with tmpfs(tmp_path / "disk", 8) as disk:
        home = _home(disk / "home", api, tmp_path, "[vault]\nlow_space_mb = 0\nreserve_mb = 1\n")
        stopped = _run_until_it_fails(home, api, tmp_path, lambda: fill(disk / "fill"))
        out = stopped.output
        assert stopped.code == FAIL_STOP, out
        said = (
            f"{STOPPING} pfar cannot write "
            f"{home.sessions_db} (database or disk is full): the disk holding "
            f"{home.vault_dir} is full; free some space."
        )
        assert said in out, out
        assert "released the journal's reserve" in out, out
        told = _told_on_telegram(api, home)
        assert "is full; free some space" in told, told
        (disk / "fill").unlink()  # the owner frees space
        _nothing_lost(home, stopped.acked, tmp_path)


def test_a_file_system_gone_read_only_stops_the_kernel_and_fsck_loses_nothing(
    tmp_path: Path, api: BotApi
) -> None:
    with ext4_on_loop(tmp_path / "disk") as disk:
        home = _home(disk.mount / "home", api, tmp_path)
        stopped = _run_until_it_fails(home, api, tmp_path, disk.read_only)
        out = stopped.output
        assert stopped.code == FAIL_STOP, out
        said = f"{STOPPING} pfar cannot write {home.sessions_db}"
        assert said in out, out
        assert f"the file system holding {home.vault_dir} is read-only" in out, out
        assert "damaged" not in out.replace("is not damaged", ""), out
        told = _told_on_telegram(api, home)
        assert "is read-only" in told, told
        # owner.log is on the same file system: it could not take the notice
        assert "could not tell the owner on owner.log" in out, out
        disk.repair()  # unmount, fsck, mount again
        _nothing_lost(home, stopped.acked, tmp_path)


def test_writes_failing_with_eio_stop_the_kernel_and_a_moved_home_loses_nothing(
    tmp_path: Path, api: BotApi
) -> None:
    with ext4_on_loop(tmp_path / "disk", errors="continue") as disk:
        home = _home(disk.mount / "home", api, tmp_path)
        stopped = _run_until_it_fails(home, api, tmp_path, disk.fail_writes)
        out = stopped.output
        assert stopped.code == FAIL_STOP, out
        said = f"{STOPPING} pfar cannot write {home.sessions_db} (disk I/O error)"
        assert said in out, out
        _told_on_telegram(api, home)
        # the owner moves the home off the failing disk, as it is, and starts it there
        moved = Home(tmp_path / "moved")
        subprocess.run(["cp", "-a", str(home.root), str(moved.root)], check=True)
    _nothing_lost(moved, stopped.acked, tmp_path)


def test_a_home_on_a_read_only_mount_is_refused_at_start_and_still_read(
    tmp_path: Path, api: BotApi
) -> None:
    with tmpfs(tmp_path / "disk", 16) as disk:
        home = _home(disk / "home", api, tmp_path)
        with running_kernel(home, out_dir=tmp_path) as k:
            made = k.request("loop", prompt="look", directory=str(tmp_path))
            k.request("wait_idle")
        remount(disk, "ro")  # between runs: nothing is open for writing
        try:
            k = KernelProcess(home, out_dir=tmp_path)
            code = k.wait_exit(timeout=60)
            listed = pfar(home, "tasks")
            shown = pfar(home, "task", "show", made["task_id"])
            asked = pfar(home, "approvals")
            held = pfar(home, "secret", "list")
        finally:
            remount(disk, "rw")
        out = k.output()
        assert code == 1, out
        assert f"pfar cannot write {home.lock_file} (Read-only file system)" in out, out
        assert f"the file system holding {home.root} is read-only" in out, out
        assert "Traceback" not in out, out
        # reading needs no write: what the vault holds is shown
        assert listed.returncode == 0, listed.stderr
        assert made["task_id"][:8] in listed.stdout, listed.stdout
        assert shown.returncode == 0, shown.stderr
        assert asked.returncode == 0, asked.stderr
        assert held.returncode == 0, held.stderr
        assert "telegram_bot_token" in held.stdout, held.stdout
        _nothing_lost(home, [made["task_id"]], tmp_path)
