"""The root of the tree: every error pfar raises on purpose is a PfarError."""

from __future__ import annotations

from typing import ClassVar


class PfarError(Exception):
    """Base of every error pfar raises on purpose."""

    # a stable name for this kind of error, beside its message: what a client (the
    # `pfar` command, the console, a script) branches on; never the class's name,
    # which may change. Each subclass names its own (tests pin them).
    code: ClassVar[str] = "error"
