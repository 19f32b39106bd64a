"""Failure, not corruption: a disk that fills up, a file system that turns read-only and
one whose writes fail with EIO, each under a running kernel with an encrypted vault.
The kernel stops (fail-stop) with a message that names the file and the error, after
telling the owner on a channel that still works (Telegram, against a loopback Bot API
server); once the owner fixes the disk, the next start has every task it acknowledged.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..integration.telegram_server import OWNER, TOKEN, BotApi, unescape
from ..support import KernelProcess, db, make_home, pfar, running_kernel, wait_for
from .disk_faults import ext4_on_loop, fill, remount, tmpfs

pytestmark = pytest.mark.crash

SCRIPT = '[[turns]]\ntext = "noted"\n'


@pytest.fixture
def api() -> Iterator[BotApi]:
    server = BotApi()
    yield server
    server.close()


def _home(root: Path, api: BotApi, work: Path, extra: str = "") -> Home:
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
{extra}
"""
    home = make_home(root, config=config, script=SCRIPT)
    done = pfar(home, "secret", "set", "telegram_bot_token", stdin=TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    return home


def _connected(api: BotApi) -> None:
    wait_for(
        lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
        what="the Telegram channel polling",
    )


def _submit_until_stopped(k: KernelProcess, work: Path, acked: list[str], tries: int = 400) -> None:
    """Loop tasks, one after another, until the kernel stops; the ids it acknowledged."""
    for n in range(tries):
        if k.proc.poll() is not None:
            return
        try:
            made = k.request("loop", prompt=f"look {n} " + "x" * 2000, directory=str(work))
        except Exception:
            continue
        acked.append(made["task_id"])


def _task_ids(home: Home) -> set[str]:
    with contextlib.closing(db(home)) as conn:
        return {r["task_id"] for r in conn.execute("SELECT task_id FROM task_journal")}


def _told(api: BotApi) -> list[str]:
    return [unescape(s.text) for s in api.sent]


def test_a_full_disk_stops_the_kernel_and_the_next_start_loses_nothing(
    tmp_path: Path, api: BotApi
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with tmpfs(tmp_path / "disk", 8) as disk:
        home = _home(disk / "home", api, work, "[vault]\nlow_space_mb = 0\nreserve_mb = 1\n")
        k = KernelProcess(home, out_dir=tmp_path)
        acked: list[str] = []
        try:
            k.wait_ready()
            _connected(api)
            _submit_until_stopped(k, work, acked, tries=3)
            fill(disk / "fill")
            _submit_until_stopped(k, work, acked)
            code = k.wait_exit(timeout=60)
        finally:
            if k.proc.poll() is None:
                k.kill()
        out = k.output()
        print(out)
        print(json.dumps(_told(api), indent=1))
        assert code == 3, out
        (disk / "fill").unlink()
        with running_kernel(home, out_dir=tmp_path):
            pass
        assert set(acked) <= _task_ids(home)


def test_a_file_system_gone_read_only_stops_the_kernel(tmp_path: Path, api: BotApi) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ext4_on_loop(tmp_path / "disk") as disk:
        home = _home(disk.mount / "home", api, work)
        k = KernelProcess(home, out_dir=tmp_path)
        acked: list[str] = []
        try:
            k.wait_ready()
            _connected(api)
            _submit_until_stopped(k, work, acked, tries=3)
            disk.read_only()
            _submit_until_stopped(k, work, acked)
            code = k.wait_exit(timeout=60)
        finally:
            if k.proc.poll() is None:
                k.kill()
        out = k.output()
        print(out)
        print(json.dumps(_told(api), indent=1))
        disk.repair()
        with running_kernel(home, out_dir=tmp_path):
            pass
        assert set(acked) <= _task_ids(home)
        assert code == 3, out


def test_writes_that_fail_with_eio_stop_the_kernel(tmp_path: Path, api: BotApi) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ext4_on_loop(tmp_path / "disk") as disk:
        home = _home(disk.mount / "home", api, work)
        k = KernelProcess(home, out_dir=tmp_path)
        acked: list[str] = []
        try:
            k.wait_ready()
            _connected(api)
            _submit_until_stopped(k, work, acked, tries=3)
            disk.fail_writes()
            _submit_until_stopped(k, work, acked)
            code = k.wait_exit(timeout=60)
        finally:
            if k.proc.poll() is None:
                k.kill()
        out = k.output()
        print(out)
        print(json.dumps(_told(api), indent=1))
        disk.repair()
        with running_kernel(home, out_dir=tmp_path):
            pass
        assert set(acked) <= _task_ids(home)
        assert code == 3, out


def test_a_home_on_a_read_only_mount_is_refused_at_start(tmp_path: Path, api: BotApi) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with tmpfs(tmp_path / "disk", 16) as disk:
        home = _home(disk / "home", api, work)
        with running_kernel(home, out_dir=tmp_path) as k:
            made = k.request("loop", prompt="look", directory=str(work))
        remount(disk, "ro")
        try:
            k = KernelProcess(home, out_dir=tmp_path)
            code = k.wait_exit(timeout=60)
            out = k.output()
            print(out)
            listed = pfar(home, "tasks")
            print(listed.stdout, listed.stderr)
        finally:
            remount(disk, "rw")
        with running_kernel(home, out_dir=tmp_path):
            pass
        assert made["task_id"] in _task_ids(home)
        assert code != 0
