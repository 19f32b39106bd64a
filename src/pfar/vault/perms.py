"""Refusing files that another local user could have changed, as ssh does with its keys.

pfar runs the commands its templates name and trusts its config, its scripted-model
file and its vault. If anyone but the owner can write one of them, or can replace
it by writing to a directory that holds it, another local user can make pfar run
their code as the owner. So before such a file is loaded, it and every directory
above it must be owned by the current user (or root) and writable by nobody else.
A root-owned directory with the sticky bit (`/tmp`) is safe: there, nobody can
rename or delete an entry they do not own.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UnsafePermissions
from .home import Home


def check_private(path: Path) -> None:
    """Raise UnsafePermissions when `path`, or a directory above it, is open to other users.

    A path that does not exist is not checked (the caller reports it as missing).
    """
    target = path.absolute()
    if not target.exists():
        return
    problem = _problem(target, is_leaf=True)
    if problem is not None:
        raise UnsafePermissions(str(path), str(target), problem)
    for directory in target.parents:
        problem = _problem(directory, is_leaf=False)
        if problem is not None:
            raise UnsafePermissions(str(path), str(directory), problem)


def check_home(home: Home) -> None:
    """What the kernel checks before it starts: everything it will load or write through."""
    for path in (
        home.root,
        home.config,
        home.vault_dir,
        home.sessions_db,
        home.secrets_db,
        home.memory_db,
        home.templates_dir,
        home.scripts_dir,
        home.hooks_dir,
    ):
        check_private(path)


def _problem(path: Path, *, is_leaf: bool) -> str | None:
    return problem_of(path.stat(), is_leaf=is_leaf)


def problem_of(st: os.stat_result, *, is_leaf: bool = True) -> str | None:
    """Why a file or folder with this status is open to other users, or None (for
    checks made on an open descriptor's fstat, where a path could be swapped)."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (os.getuid(), 0):
        return f"is owned by another user (uid {st.st_uid})"
    if not mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    if not is_leaf and st.st_uid == 0 and mode & stat.S_ISVTX:
        return None  # /tmp and the like: the sticky bit keeps our entries ours
    who = "world-writable" if mode & stat.S_IWOTH else "group-writable"
    return f"is {who} (mode {mode:04o})"
