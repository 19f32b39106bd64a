"""Replacing a file's content so that a crash leaves the old content or the new, never half."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(dir_fd: int, name: str, data: bytes, key: str) -> bool:
    """Write `data` to `name` in the open directory `dir_fd`: a temporary file beside
    it, fsynced, renamed over it, and the directory fsynced so the rename itself
    survives a power cut. The file keeps its permission bits when it existed. True when
    it existed.

    Everything is relative to `dir_fd`, never to a path walked again by name, so a
    folder swapped for a symlink meanwhile cannot send the write elsewhere; the rename
    replaces whatever is at `name` (a symlink put there is replaced, not followed).
    `key` (the step's idempotency key) names the temporary file, so a retry of the same
    step reuses its name instead of leaving another behind.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        existed = stat.S_ISREG(st.st_mode)
        mode = stat.S_IMODE(st.st_mode) if existed else 0o644
    except FileNotFoundError:
        existed, mode = False, 0o644
    tmp = f".{name}.{key.replace(':', '_').replace('/', '_')}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)  # a crashed try's leftover
    fd = os.open(tmp, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return existed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
