"""A skill's files, read for the Skill tool: confined to the skill's own folder.

Each name of the path is opened relative to the folder before it with O_NOFOLLOW, from
the place the skill was found (the task directory, or `$PFAR_HOME/skills`): a symlink
anywhere on the way is refused, never followed, and so is `..`. A task that swaps its
`.pfar/skills/x` for a symlink into the vault, or asks for `file=../../vault/x`, gets a
refusal naming the path. The file served must be a regular file with one name (a hard
link could be a file of the vault's), owned by the owner and writable by no one else.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from ...errors import ToolFailed
from ...journal.turns import SkillSeen
from ..protected import NONE, Protection
from .finding import TASK_SKILLS, is_link, is_utf8, printable, read_upto, unreadable

# a file of a skill served whole, at most (its text goes into the model's context)
MAX_FILE_BYTES: Final = 256 * 1024
# files listed beside a SKILL.md, at most, and how deep
MAX_LISTED: Final = 200
MAX_DEPTH: Final = 6
_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def place(seen: SkillSeen) -> tuple[Path, tuple[str, ...]]:
    """Where a skill was found, and its folder's names below it."""
    folder = Path(seen.path)
    if seen.source == "home":
        return folder.parent, (folder.name,)
    return folder.parents[2], (*TASK_SKILLS, folder.name)


def names_of(file: str) -> tuple[str, ...]:
    """A `file` argument as names below the skill's folder; `..`, an absolute path or
    an empty one is refused."""
    if file.startswith("/"):
        raise ToolFailed(f"Skill: file {file!r} is absolute: give a path inside the skill's folder")
    names = tuple(p for p in file.split("/") if p not in ("", "."))
    if not names:
        raise ToolFailed(f"Skill: file {file!r} names no file")
    if ".." in names:
        raise ToolFailed(f"Skill: file {file!r} leads out of the skill's folder (..)")
    return names


def read(
    seen: SkillSeen,
    names: Sequence[str],
    protection: Protection = NONE,
    limit: int = MAX_FILE_BYTES,
) -> bytes | None:
    """The bytes of the skill's file `names`, or None when it is gone. Refuses (ToolFailed)
    a symlink on the way, a file open to others or with other names, a protected path
    (a task directory's skill), and a file over `limit` bytes."""
    base, folder = place(seen)
    shown = "/".join(names)
    parts = (*folder, *names)
    if seen.source == "task" and (why := protection.rule(parts, str(base.joinpath(*parts)))):
        raise ToolFailed(f"Blocked by security policy: {shown} is a protected path ({why})")
    try:
        fd = os.open(base, _DIR & ~os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            inner = _open(fd, name, _DIR, shown)
            os.close(fd)
            fd = inner
            if inner == -1:
                return None
        file = _open(fd, parts[-1], _FILE, shown)
        if file == -1:
            return None
    finally:
        if fd != -1:
            os.close(fd)
    try:
        st = os.fstat(file)
        if stat.S_ISDIR(st.st_mode):
            raise ToolFailed(f"Skill: {shown} is a folder (the files are listed with the skill)")
        if why := unreadable(st, limit):
            raise ToolFailed(f"Skill: {shown} {why}, so it is not served")
        return read_upto(file, limit)
    finally:
        os.close(file)


def _open(parent: int, name: str, flags: int, shown: str) -> int:
    """`name` opened in `parent`, -1 when it does not exist."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        return -1
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(parent, name):
            raise ToolFailed(
                f"Skill: {shown}: {name} is a symbolic link, which a skill's files never follow"
            ) from None
        if exc.errno == errno.ENOTDIR:
            return -1
        raise ToolFailed(f"Skill: cannot open {shown}: {exc.strerror}") from None


def listing(seen: SkillSeen) -> tuple[list[str], bool]:
    """The files beside SKILL.md (relative to the skill's folder, sorted), and whether
    the list was cut at MAX_LISTED."""
    base, folder = place(seen)
    try:
        fd = os.open(base, _DIR & ~os.O_NOFOLLOW)
    except OSError:
        return [], False
    try:
        for name in folder:
            try:
                inner = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                return [], False
            os.close(fd)
            fd = inner
        found: list[str] = []
        for rel in _walk(fd, "", 0):
            if len(found) == MAX_LISTED:
                return sorted(found), True
            found.append(rel)
        return sorted(found), False
    finally:
        os.close(fd)


def _walk(fd: int, prefix: str, depth: int) -> Iterator[str]:
    for name in sorted(os.listdir(fd)):
        rel = f"{prefix}{name}"
        if rel == "SKILL.md":
            continue
        if not is_utf8(rel):  # a tool result is stored as UTF-8
            yield f"{printable(rel)} (its name is not UTF-8: not served)"
            continue
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            yield f"{rel} (a symbolic link: not followed)"
        elif stat.S_ISDIR(mode):
            if depth + 1 >= MAX_DEPTH:
                yield f"{rel}/ (not listed: deeper than {MAX_DEPTH} folders)"
                continue
            try:
                inner = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                continue
            try:
                yield from _walk(inner, f"{rel}/", depth + 1)
            finally:
                os.close(inner)
        elif stat.S_ISREG(mode):
            yield rel
