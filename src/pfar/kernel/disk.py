"""The disk under the home: a warning before it fills, and a reserve for when it does.

A journal commit that finds the disk full stops the kernel (fail-stop: the journal is
never left guessing). Two things soften that:

- The kernel looks at the free space of the home's filesystem every few seconds and
  tells the owner once when it falls below `[vault] low_space_mb`, and once more
  each time it falls below again after it had risen clear of it.
- While it runs, it keeps a reserve file of `[vault] reserve_mb` in the vault
  (`vault/reserve`, its blocks allocated, not sparse), made at start when there is
  room (the free space stays above the warning threshold). When a journal commit
  fails, the reserve is deleted, so what the stopping kernel still writes (its audit
  entry, SQLite undoing the failed transaction) and the next start (opening the
  journal, recovery, the owner's report) find room. A kernel that stops gives the
  space back too (a stopped pfar holds no disk space it does not use); one killed
  leaves it to the next start, which keeps it.

The reserve holds only on filesystems that allocate what `posix_fallocate` asks for
(ext4, xfs, tmpfs); on one that compresses or copies on write (btrfs, zfs) it may
hold less than it says.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
RESERVE_NAME = "reserve"
# how often the free space is looked at: a statvfs call, nothing more
CHECK_SECONDS = 2.0
_CHUNK = MB


@dataclass
class DiskWatch:
    """The free space of the filesystem holding `root`, and the reserve file."""

    root: Path
    reserve: Path
    low_bytes: int  # 0: no warning
    reserve_bytes: int  # 0: no reserve
    low: bool = False  # below the threshold when last looked at

    def free(self) -> int:
        """Bytes an unprivileged process can still write there."""
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def crossed(self) -> int | None:
        """The free bytes when the space just fell below the threshold, else None. It
        is armed again once the space rose a tenth (at least 1 MB) above the threshold,
        so a disk hovering at the threshold is one warning, not one a look."""
        if self.low_bytes <= 0:
            return None
        free = self.free()
        if free < self.low_bytes:
            if self.low:
                return None
            self.low = True
            return free
        if free >= self.low_bytes + max(self.low_bytes // 10, MB):
            self.low = False
        return None

    def make_reserve(self) -> bool:
        """Make the reserve whole when the space allows (after it, the free space stays
        at or above the warning threshold); True when it is whole."""
        if self.reserve_bytes <= 0:
            self.release()  # turned off: give the space back
            return False
        try:
            have = self.reserve.stat().st_blocks * 512
        except FileNotFoundError:
            have = 0
        need = self.reserve_bytes - have
        if need <= 0:
            return True
        try:
            if self.free() - need < self.low_bytes:
                return False
        except OSError:
            return False
        try:
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        try:
            _allocate(fd, self.reserve_bytes)
            os.fsync(fd)
        except OSError:
            self.release()  # half a reserve is space taken for nothing
            return False
        finally:
            os.close(fd)
        return True

    def release(self) -> bool:
        """Delete the reserve; True when there was one."""
        try:
            self.reserve.unlink()
        except FileNotFoundError:
            return False
        except OSError:
            return False
        with contextlib.suppress(OSError):
            fd = os.open(self.reserve.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return True


def _allocate(fd: int, size: int) -> None:
    """Real blocks for `size` bytes: posix_fallocate, or zeros written where the
    filesystem does not support it."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    os.lseek(fd, 0, os.SEEK_SET)
    zeros = bytes(_CHUNK)
    written = 0
    while written < size:
        written += os.write(fd, zeros[: min(_CHUNK, size - written)])


def low_space_message(root: Path, free: int, low_bytes: int) -> str:
    return (
        f"The disk holding pfar's home ({root}) has {free // MB} MB free, below "
        f"[vault] low_space_mb = {low_bytes // MB}. When it is full, pfar stops "
        "(its journal is never written half) until there is room again: free some space "
        "on that disk."
    )
