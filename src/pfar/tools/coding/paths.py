"""Paths a model gives: relative to the working directory, or absolute inside it."""

from __future__ import annotations

from ..base import ToolContext
from ..protected import NONE, Protection
from .beneath import Located, locate


def protection(ctx: ToolContext) -> Protection:
    return ctx.protection or NONE


def place(
    ctx: ToolContext,
    value: str,
    tool: str,
    *,
    make_parents: bool = False,
    writing: bool = False,
) -> Located:
    """`value` beneath the task's working directory, opened folder by folder (see
    beneath.py): one leading out of it, or a protected one, is refused by name.
    `writing`: the tool changes it (a task directory's skills are refused then)."""
    return locate(
        ctx.workspace,
        value,
        tool,
        protection(ctx),
        make_parents=make_parents,
        writing=writing,
    )
