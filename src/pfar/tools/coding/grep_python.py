"""Grep's search when ripgrep is not installed: the same output, from Python's `re`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ...errors import ToolFailed
from .patterns import compile_glob, walk_files

if TYPE_CHECKING:
    from .grep import Search

# output lines past which the search stops (more than any result shows)
_MAX_LINES: Final = 200_000


def search(q: Search, root: Path, target: Path, tool: str) -> list[str]:
    """The lines ripgrep would print for `q` over `target` (a file or a directory under
    `root`), paths relative to `root`."""
    try:
        regex = re.compile(q.pattern, re.IGNORECASE if q.ignore_case else 0)
    except re.error as exc:
        raise ToolFailed(f"{tool}: invalid regular expression {q.pattern!r}: {exc}") from None
    only = None
    if q.glob and target.is_dir():
        only = (compile_glob(q.glob), "/" in q.glob.strip("/"))
    files = [target] if target.is_file() else walk_files(target)
    out: list[str] = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        if only is not None:
            matcher, whole_path = only
            if not matcher.match(rel if whole_path else file.name):
                continue
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data:
            continue  # binary
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hits = [n for n, line in enumerate(lines) if regex.search(line)]
        if not hits:
            continue
        if q.mode == "files_with_matches":
            out.append(rel)
        elif q.mode == "count":
            out.append(f"{rel}:{len(hits)}")
        else:
            _content(out, q, rel, lines, hits)
        if len(out) > _MAX_LINES:
            break
    return out


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
