"""Grep's search when ripgrep is not installed: the same output, from Python's `re`."""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING, Final

from ...errors import ToolFailed
from ..protected import Protection
from .beneath import Located, open_dir
from .patterns import compile_glob
from .walk import Walked, walk_files

if TYPE_CHECKING:
    from .grep import Search

# output lines past which the search stops (more than any result shows)
_MAX_LINES: Final = 200_000
# the most of one file searched (ripgrep streams; this search reads a file at once)
_MAX_FILE_BYTES: Final = 32 << 20
# O_NONBLOCK: a FIFO met on the walk must not hang the search
_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def search(q: Search, at: Located, guard: Protection, tool: str) -> tuple[list[str], Walked]:
    """The lines ripgrep would print for `q` over the located file or folder, paths
    relative to the working directory; and what the walk left out."""
    try:
        regex = re.compile(q.pattern, re.IGNORECASE if q.ignore_case else 0)
    except re.error as exc:
        raise ToolFailed(f"{tool}: invalid regular expression {q.pattern!r}: {exc}") from None
    walked = Walked()
    out: list[str] = []
    if at.name and not _is_dir(at):
        _file(out, q, regex, at.relative, at.parent, at.name)
        return out, walked
    top = open_dir(at, tool, at.relative)
    try:
        only = (compile_glob(q.glob), "/" in q.glob.strip("/")) if q.glob else None
        for found in walk_files(top, at.parts, at.root, guard, walked):
            rel = "/".join(found.parts)
            if only is not None:
                matcher, whole_path = only
                if not matcher.match(rel if whole_path else found.name):
                    continue
            _file(out, q, regex, rel, found.dir_fd, found.name)
            if len(out) > _MAX_LINES:
                break
    finally:
        os.close(top)
    return out, walked


def _file(
    out: list[str], q: Search, regex: re.Pattern[str], rel: str, dir_fd: int, name: str
) -> None:
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return  # gone, unreadable, or swapped for a symlink meanwhile
    with os.fdopen(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        data = data[:_MAX_FILE_BYTES]  # its start only: memory stays bounded
    if b"\0" in data:
        return  # binary
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    hits = [n for n, line in enumerate(lines) if regex.search(line)]
    if not hits:
        return
    if q.mode == "files_with_matches":
        out.append(rel)
    elif q.mode == "count":
        out.append(f"{rel}:{len(hits)}")
    else:
        _content(out, q, rel, lines, hits)


def _is_dir(at: Located) -> bool:
    try:
        return stat.S_ISDIR(os.stat(at.name, dir_fd=at.parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _content(out: list[str], q: Search, rel: str, lines: list[str], hits: list[int]) -> None:
    context = q.before > 0 or q.after > 0
    wanted: set[int] = set()
    for n in hits:
        wanted.update(range(max(0, n - q.before), min(len(lines), n + q.after + 1)))
    matched = set(hits)
    previous = None
    for n in sorted(wanted):
        if context and out and (previous is None or n > previous + 1):
            out.append("--")
        sep = ":" if n in matched else "-"
        number = f"{n + 1}{sep}" if q.line_numbers else ""
        out.append(f"{rel}{sep}{number}{lines[n]}")
        previous = n
