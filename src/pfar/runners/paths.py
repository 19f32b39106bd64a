"""Paths a definition names relative to a directory (a task workspace, a workflow directory).

Checked twice: as written, when the file that names them is loaded (an absolute path or a
`..` that leads out is refused there, before anything runs), and as resolved, when they
are used (a symlink inside may point anywhere by then).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


def outside_problem(relative: str, where: str) -> str | None:
    """Why `relative` cannot name a file inside `where` (e.g. "the task workspace"), or None."""
    if not relative.strip():
        return f"is empty: name a file in {where}"
    if "\0" in relative:
        return f"{relative!r} contains a NUL byte"
    if PurePosixPath(relative).is_absolute():
        return f"{relative!r} is an absolute path: give it relative to {where}"
    normal = os.path.normpath(relative)
    if normal == ".." or normal.startswith("../"):
        return f"{relative!r} leads outside {where} (through '..')"
    if normal == ".":
        return f"{relative!r} names {where} itself, not a file in it"
    return None


def resolved_inside(base: Path, relative: str) -> Path | None:
    """`base / relative` with symlinks resolved, or None when that lands outside `base`."""
    try:
        root = base.resolve()
        target = (base / relative).resolve()
    except (OSError, ValueError, RuntimeError):  # a loop or a name the OS cannot hold
        return None
    return target if root in target.parents else None


def exists_inside(base: Path, relative: str) -> bool:
    """`relative` is there, inside `base` once symlinks are resolved: what is outside is
    not the directory's file, whatever is there."""
    target = resolved_inside(base, relative)
    try:
        return target is not None and target.exists()
    except (OSError, ValueError):  # a name the file system cannot hold is not there
        return False
