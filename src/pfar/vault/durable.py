"""Files that are on the disk when a function returns: synced, renamed into place, with
their directory synced. What backups and restores write goes through here."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def copy_synced(src: Path, dst: Path) -> str:
    """Copy `src` to the new file `dst` (owner-only), synced; return the sha256 of the
    bytes written (what was read, so a file that changed under the copy is noticed)."""
    digest = hashlib.sha256()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(src, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return digest.hexdigest()


def write_json(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON, atomically (a reader sees the old file or the
    new one, never half of one)."""
    write_text(path, json.dumps(data, indent=2) + "\n")


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text`, atomically, readable by its owner only."""
    # a name of its own: two writers at once (a scheduled backup and one by hand) each
    # replace the file whole, the last one winning
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
