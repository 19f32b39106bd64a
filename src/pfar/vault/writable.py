"""Why a file in the home cannot be written: a full disk, a read-only file system, an
I/O error or permissions, told apart so that the message says what to fix.

A file system the OS made read-only after a disk error (Linux's ext4 with
errors=remount-ro) may still say it is writable to `access()` and `statvfs()`: only a
write finds out. `write_probe` creates, fsyncs and removes a small file of its own,
never one that holds data.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from ..errors import VaultUnwritable

# below this, a disk counts as full: SQLite writes a page (and its WAL frame) at a time
FULL_BELOW = 64 * 1024

NOT_DAMAGED = (
    "The file is not damaged and nothing in it was changed: fix that, then start again "
    "(do not move, delete or re-create the file: it holds your data)."
)


def disk_full(directory: Path) -> bool:
    try:
        return shutil.disk_usage(directory).free < FULL_BELOW
    except OSError:
        return False


def mounted_read_only(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def write_probe(directory: Path) -> int | None:
    """The errno of creating (then removing) a small new file in `directory`, or None
    when that works."""
    probe = directory / f".pfar-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        return exc.errno
    try:
        os.write(fd, b"\0")
        os.fsync(fd)
    except OSError as exc:
        return exc.errno
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def read_only_advice(directory: Path) -> str:
    return (
        f"the file system holding {directory} is read-only (mounted so, or remounted "
        "read-only by the OS after a disk error: see `dmesg`); make it writable again "
        "(`mount -o remount,rw`; after a disk error, unmount it and check it with fsck "
        "first)"
    )


def full_advice(directory: Path) -> str:
    return f"the disk holding {directory} is full; free some space"


IO_ADVICE = "the disk reported an I/O error; check it (dmesg) before anything else"


def why_not(directory: Path, code: int | None = None) -> str | None:
    """What stops writes in `directory` (a full disk, a read-only file system, an I/O
    error), or None when it takes them (then it is the file itself, or permissions).
    `code`: the errno of the write that failed, when known."""
    if code in (errno.ENOSPC, errno.EDQUOT) or disk_full(directory):
        return full_advice(directory)
    if code == errno.EROFS or mounted_read_only(directory):
        return read_only_advice(directory)
    if code == errno.EIO:
        return IO_ADVICE
    found = write_probe(directory) if directory.is_dir() else None
    if found == errno.EROFS:
        return read_only_advice(directory)
    if found in (errno.ENOSPC, errno.EDQUOT):
        return full_advice(directory)
    if found == errno.EIO:
        return IO_ADVICE
    return None


def unwritable_file(path: Path, exc: OSError) -> VaultUnwritable:
    """pfar's error for a plain file of the home (the lock file, owner.log) that cannot
    be opened or written."""
    why = why_not(path.parent, exc.errno) or (
        f"check that {path} is a file pfar's user may write, in a directory it may write"
    )
    return VaultUnwritable(
        f"pfar cannot write {path} ({exc.strerror or exc}): {why}; fix that, then start pfar again."
    )
