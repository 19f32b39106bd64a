"""A path the model gives, opened beneath the working directory through directory
descriptors.

Checking a path by name and then opening it by name leaves a gap: a process that swaps
a folder for a symlink between the two makes the open land elsewhere. Here the
working directory is opened once, and each name is opened relative to the descriptor
of the folder before it with O_NOFOLLOW, so nothing is walked twice by name. A
symlink met on the way is read (readlinkat) and followed by hand, only while it stays
beneath the working directory: `..` above it, or an absolute target outside it, is
refused like `../x`. The file's real path is then known name by name, and it is what
the protected paths are matched against.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ...errors import ToolFailed
from ..protected import NONE, Protection

# symlinks followed in one path before it is refused (the kernel's own limit)
_MAX_LINKS: Final = 40
# a name looked at again when it changed between its open and its readlink
_RETRIES: Final = 3
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class Located:
    """Where a path leads: the folder that holds it (an open descriptor, closed by
    `close`) and its name there; `parts` are its names below the working directory,
    symlinks resolved ("" name and no parts: the working directory itself)."""

    root: str  # the working directory's real path
    parent: int
    name: str
    parts: tuple[str, ...]
    _fds: list[int] = field(default_factory=list)

    @property
    def relative(self) -> str:
        return "/".join(self.parts) or "."

    @property
    def absolute(self) -> str:
        return os.path.join(self.root, *self.parts) if self.parts else self.root

    def close(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def locate(
    workspace: Path,
    value: str,
    tool: str,
    protection: Protection = NONE,
    *,
    make_parents: bool = False,
    writing: bool = False,
) -> Located:
    """`value` (relative, or absolute inside the working directory) beneath
    `workspace`, its folders opened one by one (created with `make_parents`). The last
    name is resolved when it is a symlink, and need not exist. Refuses a path outside
    the working directory or a protected one, naming it (`writing`: with the paths
    protected from writes only, protected.py)."""
    root = os.path.realpath(workspace)
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise ToolFailed(
            f"{tool}: the working directory {workspace} cannot be opened: {exc.strerror}"
        ) from None
    stack = [root_fd]
    names: list[str] = []
    try:
        relative = _below(value, workspace, root, tool)
        if os.path.normpath(relative).split("/")[0] == "..":
            raise _outside(tool, value)  # said so even when a folder on the way is missing
        todo = deque(_parts(relative))
        links = retries = 0
        while todo:
            name = todo.popleft()
            if name == "..":
                if not names:
                    raise _outside(tool, value)
                os.close(stack.pop())
                names.pop()
                continue
            if not todo:  # the last name: resolved if it is a symlink, else left as it is
                target = _link(stack[-1], name)
                if target is None:
                    names.append(name)
                    break
            else:
                _guard(protection, value, (*names, name), root, writing)  # before a folder is made
                try:
                    fd = _open_dir(stack[-1], name, make_parents)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise _failed(tool, value, exc) from None
                    target = _link(stack[-1], name)
                    if target is None:
                        # a file, or a symlink gone since the open: look again, a few times
                        retries += 1
                        if retries > _RETRIES:
                            raise ToolFailed(
                                f"{tool}: {value}: {name} is not a directory"
                            ) from None
                        todo.appendleft(name)
                        continue
                else:
                    stack.append(fd)
                    names.append(name)
                    continue
            links += 1
            if links > _MAX_LINKS:
                raise ToolFailed(f"{tool}: {value}: too many symlinks")
            if target.startswith("/"):
                rest = _below(target, None, root, tool, shown=value)
                while len(stack) > 1:
                    os.close(stack.pop())
                names.clear()
                todo.extendleft(reversed(_parts(rest)))
            else:
                todo.extendleft(reversed(_parts(target)))
        parts = tuple(names)
        _guard(protection, value, parts, root, writing)
        if parts:
            return Located(root, stack[-1], parts[-1], parts, stack)
        return Located(root, root_fd, "", (), stack)
    except BaseException:
        for fd in stack:
            os.close(fd)
        raise


def open_dir(place: Located, tool: str, shown: str) -> int:
    """The located directory, opened (the caller closes it)."""
    if not place.name:
        return os.dup(place.parent)
    try:
        return os.open(place.name, _DIR_FLAGS, dir_fd=place.parent)
    except FileNotFoundError:
        raise ToolFailed(f"{tool}: path {shown} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise ToolFailed(f"{tool}: path {shown} is not a directory") from None
        raise ToolFailed(f"{tool}: cannot open {shown}: {exc.strerror}") from None


def open_file(place: Located, tool: str, shown: str) -> int:
    """The located regular file, opened for reading (the caller closes it), or a
    ToolFailed saying what it is instead."""
    if not place.name:
        raise ToolFailed(f"{tool}: {shown} is a directory, not a file (Glob lists its files)")
    try:
        # O_NONBLOCK: a FIFO put there must not hang the call; regular files ignore it
        fd = os.open(
            place.name,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=place.parent,
        )
    except FileNotFoundError:
        raise ToolFailed(f"{tool}: {shown} does not exist (Glob finds files by name)") from None
    except PermissionError:
        raise ToolFailed(f"{tool}: {shown} cannot be read (permission denied)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a symlink since it was located
            raise ToolFailed(f"{tool}: {shown} changed while it was opened; try again") from None
        raise ToolFailed(f"{tool}: cannot open {shown}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        os.set_blocking(fd, True)
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise ToolFailed(f"{tool}: {shown} is a directory, not a file (Glob lists its files)")
    raise ToolFailed(f"{tool}: {shown} is not a regular file")


def _guard(
    protection: Protection, value: str, parts: tuple[str, ...], root: str, writing: bool
) -> None:
    absolute = os.path.join(root, *parts) if parts else root
    if why := protection.rule(parts, absolute, writing=writing):
        raise ToolFailed(f"Blocked by security policy: {value} is a protected path ({why})")


def _below(value: str, workspace: Path | None, root: str, tool: str, *, shown: str = "") -> str:
    """`value` relative to the working directory: a relative path as it is, an absolute
    one with the working directory (as given, or its real path) taken off its front."""
    if not value.startswith("/"):
        return value
    norm = os.path.normpath(value)
    bases = [root] if workspace is None else [os.path.normpath(workspace.absolute()), root]
    for base in bases:
        if norm == base:
            return "."
        if norm.startswith(base.rstrip("/") + "/"):
            return norm[len(base.rstrip("/")) + 1 :]
    raise _outside(tool, shown or value)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _open_dir(parent: int, name: str, make: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not make:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _link(parent: int, name: str) -> str | None:
    """The symlink `name`'s target, or None when it is no symlink (or does not exist)."""
    try:
        return os.readlink(name, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def _outside(tool: str, value: str) -> ToolFailed:
    return ToolFailed(f"{tool}: path {value!r} is outside the task workspace")


def _failed(tool: str, value: str, exc: OSError) -> ToolFailed:
    if isinstance(exc, FileNotFoundError):
        return ToolFailed(f"{tool}: {value} does not exist (Glob finds files by name)")
    return ToolFailed(f"{tool}: cannot open {value}: {exc.strerror}")
