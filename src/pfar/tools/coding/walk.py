"""The walk Glob and Grep's Python search make: through directory descriptors, never
following a symlink, leaving out protected paths, and stopping at a cap.

Each folder is opened relative to the one above it with O_NOFOLLOW (see beneath.py),
so a folder swapped for a symlink during the walk is not entered. A protected file or
folder is counted, never yielded: its name reaches no result. The walk stops after
MAX_VISITED entries, so a huge tree costs a bounded time; the result says so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from ..protected import Protection

SKIPPED_DIRS: Final = frozenset({".git"})
# directory entries looked at before a walk stops
MAX_VISITED: Final = 200_000
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class Walked:
    """What one walk saw besides the files it yielded."""

    visited: int = 0
    protected: int = 0  # protected files and folders left out
    stopped: bool = False  # the cap was reached: the walk is incomplete
    limit: int = MAX_VISITED

    def notes(self) -> list[str]:
        """What a result says about the walk."""
        out = []
        if self.protected:
            n = self.protected
            out.append(
                f"[{n} protected {'path was' if n == 1 else 'paths were'} skipped "
                "([loop.policy] protected_paths and pfar's built-in ones).]"
            )
        if self.stopped:
            out.append(
                f"[The search stopped after {self.limit:,} directory entries; the results "
                "are incomplete. Give a narrower `path`.]"
            )
        return out


@dataclass(frozen=True, slots=True)
class Found:
    """A regular file met on the walk: its names below the working directory, and its
    folder's open descriptor and its name there (valid until the walk moves on)."""

    parts: tuple[str, ...]
    dir_fd: int
    name: str
    entry: os.DirEntry[str]


def walk_files(
    top_fd: int, prefix: tuple[str, ...], root: str, protection: Protection, walked: Walked
) -> Iterator[Found]:
    """Every regular file below the open folder `top_fd` (whose names below the working
    directory `root` are `prefix`), in ripgrep's `--sort path` order (each folder's
    entries by name), never entering `.git`, following no symlink."""
    try:
        entries = sorted(os.scandir(top_fd), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if walked.visited >= walked.limit:
            walked.stopped = True
            return
        walked.visited += 1
        parts = (*prefix, entry.name)
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if not (is_dir or is_file) or (is_dir and entry.name in SKIPPED_DIRS):
            continue
        if protection.rule(parts, os.path.join(root, *parts)):
            walked.protected += 1
            continue
        if is_file:
            yield Found(parts, top_fd, entry.name, entry)
            continue
        try:
            fd = os.open(entry.name, _DIR_FLAGS, dir_fd=top_fd)
        except OSError:
            continue  # gone, or swapped for a symlink meanwhile
        try:
            yield from walk_files(fd, parts, root, protection, walked)
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        if walked.stopped:
            return
