"""`pfar run --ready-file PATH`: a file that exists while the kernel takes requests, so a
script starts the kernel in the background and waits for the file instead of sleeping."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..kernel.terminal import say


def write(path: Path) -> None:
    """Written whole (beside it, then renamed): a script that sees the file reads a pid."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        part.write_text(f"{os.getpid()}\n")
        part.replace(path)
    except OSError as exc:
        # the kernel runs on; the script waiting for the file is told why it never comes
        with contextlib.suppress(OSError):
            part.unlink()
        say(f"pfar: cannot write the ready file {path}: {exc.strerror}")


def remove(path: Path) -> None:
    """Gone when the kernel stops: a stale file would tell the next script it is up."""
    with contextlib.suppress(OSError):
        if path.read_text().strip() == str(os.getpid()):
            path.unlink()


def clear(path: Path) -> None:
    """Before the start: a file a killed kernel left must not say this one is ready."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
