"""Paths a model gives: relative to the working directory, or absolute inside it."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ToolFailed
from ..base import ToolContext, inside


def resolve(ctx: ToolContext, value: str, tool: str) -> Path:
    """The file `value` names, inside the task's working directory (symlinks followed:
    one leading out of it is refused like `../x`)."""
    return inside(ctx.workspace, value, tool)


def shown(ctx: ToolContext, path: Path) -> str:
    """How results name a path: relative to the working directory, so the model can
    pass it straight back to another tool."""
    root = ctx.workspace.resolve()
    if path == root:
        return "."
    return path.relative_to(root).as_posix() if root in path.parents else str(path)


def existing_file(ctx: ToolContext, value: str, tool: str) -> Path:
    """`value` as a regular file that exists, or a ToolFailed saying what it is instead."""
    path = resolve(ctx, value, tool)
    if not path.exists():
        raise ToolFailed(f"{tool}: {value} does not exist (Glob finds files by name)")
    if path.is_dir():
        raise ToolFailed(f"{tool}: {value} is a directory, not a file (Glob lists its files)")
    if not path.is_file():
        raise ToolFailed(f"{tool}: {value} is not a regular file")
    if not os.access(path, os.R_OK):
        raise ToolFailed(f"{tool}: {value} cannot be read (permission denied)")
    return path
