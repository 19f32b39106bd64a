"""Replacing a file's content so that a crash leaves the old content or the new, never half."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, key: str) -> None:
    """Write `data` to `path`: a temporary file beside it, fsynced, renamed over it, and
    the directory fsynced so the rename itself survives a power cut. The file keeps its
    permission bits when it existed; parent directories are created.

    `key` (the step's idempotency key) names the temporary file, so a retry of the same
    step reuses its name instead of leaving another behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    tmp = path.with_name(f".{path.name}.{key.replace(':', '_')}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
