"""A home on a small filesystem (a tmpfs the test mounts, so it needs root): the owner
is told once when the free space falls below `[vault] low_space_mb`, and once more
each time it falls below again; a journal commit that finds the disk full stops the
kernel (fail-stop) and releases the journal's reserve, so the next start has room to
recover and say so, with nothing else freed."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.kernel import disk
from pfar.vault.home import Home

from ..support import KernelProcess, db, make_home, running_kernel, wait_for

MB = 1024 * 1024
CONFIG = '[vault]\nlow_space_mb = 8\nreserve_mb = 2\n[loop]\ntools = ["Read"]\n'
SCRIPT = '[[turns]]\ntext = "ok"\n'


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the home needs root")
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(path: Path, leave: int) -> None:
    """Write `path` until the filesystem has about `leave` bytes free (0: full)."""
    chunk = bytes(64 * 1024)
    with open(path, "ab", buffering=0) as f:
        while _free(path.parent) - len(chunk) >= leave:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        if leave == 0:  # the last pages, one at a time
            with contextlib.suppress(OSError):
                while True:
                    f.write(bytes(4096))


def _warnings(home: Home) -> list[str]:
    with contextlib.closing(db(home)) as conn:
        rows = conn.execute(
            "SELECT body FROM owner_outbox WHERE message_key LIKE 'disk-low:%' ORDER BY seq"
        ).fetchall()
    return [r[0] for r in rows]


def _home(small_disk: Path) -> Home:
    return make_home(small_disk / "home", config=CONFIG, script=SCRIPT)


def test_the_owner_is_told_once_each_time_the_disk_runs_low(small_disk: Path) -> None:
    home = _home(small_disk)
    fill = small_disk / "fill"
    with running_kernel(home):
        reserve = home.vault_dir / disk.RESERVE_NAME
        assert reserve.stat().st_blocks * 512 >= 2 * MB  # allocated, not sparse
        assert _warnings(home) == []
        _fill(fill, leave=4 * MB)
        wait_for(lambda: _warnings(home), timeout=20, what="the low-space warning")
        (said,) = _warnings(home)
        assert f"The disk holding pfar's home ({home.root}) has" in said
        assert "below [vault] low_space_mb = 8" in said
        time.sleep(3 * disk.CHECK_SECONDS)  # later looks find it still low: no new word
        assert len(_warnings(home)) == 1
        fill.unlink()
        time.sleep(2 * disk.CHECK_SECONDS)  # a look finds room again
        _fill(fill, leave=4 * MB)
        wait_for(lambda: len(_warnings(home)) == 2, timeout=20, what="the second warning")
    assert not reserve.exists()  # a stopped kernel holds no space it does not use


def test_a_full_disk_stops_the_kernel_and_the_reserve_lets_the_next_start_recover(
    small_disk: Path, tmp_path: Path
) -> None:
    home = _home(small_disk)
    work = tmp_path / "work"
    work.mkdir()
    reserve = home.vault_dir / disk.RESERVE_NAME
    k = KernelProcess(home)
    try:
        k.wait_ready()
        assert reserve.exists()
        _fill(small_disk / "fill", leave=0)
        for n in range(200):  # until a commit needs a page the disk does not have
            if k.proc.poll() is not None:
                break
            with contextlib.suppress(Exception):
                k.request("loop", prompt=f"look {n} " + "x" * 4000, directory=str(work))
        code = k.wait_exit(timeout=30)
    finally:
        if k.proc.poll() is None:
            k.kill()
    out = k.output()
    assert code == 3, out  # fail-stop
    assert "journal write failed; stopping the kernel" in out, out
    assert "released the journal's reserve" in out, out
    assert not reserve.exists()
    before = len(_warnings(home))
    # nothing else was freed: the reserve's room is what the next start runs on
    with running_kernel(home) as again:
        assert again.request("ping")
        wait_for(lambda: len(_warnings(home)) > before, timeout=20, what="the owner told")
        assert not reserve.exists()  # no room to make it again: not made
