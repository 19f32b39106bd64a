"""Real disks that fail, for the fail-stop tests: a small tmpfs that fills up, and an
ext4 file system on a loop device that can be made read-only (the kernel's own
emergency remount after a file-system error) or made to fail every write with EIO
(its loop device's backing file sits on a tmpfs that is then filled).

Mounting needs root: elsewhere the tests skip with the reason, and under `CI=true`
they fail instead (CI runs as root: a skip there would hide a test that never ran).
Every mount is undone in teardown, whatever the test did.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MB = 1024 * 1024


def cannot(reason: str) -> None:
    """Skip the test with `reason`; under CI=true, fail it: there it must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true runs this test", pytrace=False)
    pytest.skip(reason)


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        cannot(f"{what} needs root (it mounts file systems)")
    for tool in ("mount", "umount"):
        if shutil.which(tool) is None:
            cannot(f"{what} needs `{tool}`")


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def _must(*cmd: str) -> str:
    done = _run(*cmd)
    if done.returncode != 0:
        raise AssertionError(f"`{' '.join(cmd)}` failed: {done.stderr.strip()}")
    return done.stdout.strip()


def free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path) -> None:
    """Write `path` until its file system is full, to the last page."""
    with open(path, "ab", buffering=0) as f:
        for size in (MB, 4096):
            with contextlib.suppress(OSError):
                while True:
                    try:
                        f.write(bytes(size))
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC, exc
                        raise


@contextlib.contextmanager
def tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of `size_mb` at `where` (made), unmounted afterwards."""
    need_root("a small file system that fills up")
    where.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where))
    if done.returncode != 0:
        cannot(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


def remount(where: Path, mode: str) -> None:
    """`mount -o remount,ro` (or rw): refused (EBUSY) while a file there is open for
    writing, so only between runs; a file system that turns read-only under a running
    kernel is LoopDisk.read_only."""
    _must("mount", "-o", f"remount,{mode}", str(where))


@dataclass
class LoopDisk:
    """ext4 on a loop device, mounted at `mount` with errors=remount-ro. Its image is a
    sparse file on a tmpfs smaller than the image: filling that tmpfs makes every write
    that needs a new block of the image fail, and ext4 reports EIO (a failed fsync)."""

    mount: Path
    backing: Path  # the tmpfs holding the image
    image: Path
    device: str
    errors: str

    def read_only(self) -> None:
        """ext4 finds an error and remounts itself read-only, files open or not (what a
        `mount -o remount,ro` cannot do while a file is open for writing: EBUSY)."""
        name = Path(self.device).name
        Path(f"/sys/fs/ext4/{name}/trigger_fs_error").write_text("pfar test\n")
        opts = _mount_options(self.mount)
        assert "ro" in opts or "emergency_ro" in opts, opts

    def fail_writes(self) -> None:
        """Fill the tmpfs under the image: the device's next new block cannot be stored."""
        fill(self.backing / "fill")

    def repair(self) -> None:
        """What the owner does after the failure: give the device its room back, unmount,
        check the file system (ext4 replays its journal) and mount it again."""
        with contextlib.suppress(FileNotFoundError):
            (self.backing / "fill").unlink()
        _must("umount", str(self.mount))
        done = _run("e2fsck", "-f", "-y", str(self.device))
        # 0: clean, 1: errors corrected (the error the test triggered is recorded)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        _must("mount", "-o", f"errors={self.errors}", self.device, str(self.mount))


def _mount_options(where: Path) -> set[str]:
    """The options of the last mount at `where` (/proc/self/mounts)."""
    found: set[str] = set()
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == str(where):
            found = set(parts[3].split(","))
    return found


@contextlib.contextmanager
def ext4_on_loop(
    where: Path, size_mb: int = 96, backing_mb: int = 48, errors: str = "remount-ro"
) -> Iterator[LoopDisk]:
    """`errors`: what ext4 does on an error (remount-ro, continue)."""
    need_root("an ext4 file system on a loop device")
    for tool in ("losetup", "mkfs.ext4", "e2fsck"):
        if shutil.which(tool) is None:
            cannot(f"an ext4 file system on a loop device needs `{tool}`")
    with tmpfs(where / "backing", backing_mb) as backing:
        image = backing / "ext4.img"
        with open(image, "wb") as f:
            f.truncate(size_mb * MB)
        _must("mkfs.ext4", "-q", "-F", str(image))
        done = _run("losetup", "--find", "--show", str(image))
        if done.returncode != 0:
            cannot(f"no loop device here: {done.stderr.strip()}")
        device = done.stdout.strip()
        mount = where / "ext4"
        mount.mkdir()
        try:
            _must("mount", "-o", f"errors={errors}", device, str(mount))
            mount.chmod(0o700)
            yield LoopDisk(mount, backing, image, device, errors)
        finally:
            _run("umount", "-l", str(mount))
            _run("losetup", "-d", device)
