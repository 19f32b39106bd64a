"""A task's text from the command line, stdin (`-`) or a file (`--file PATH`): a prompt
too big for argv (its limits are far below the kernel's 1 MiB) comes in whole."""

from __future__ import annotations

import sys

import click

from ..errors import PfarError

FILE_HELP = "Read the text from this file (UTF-8) instead of the argument."


def text_from(given: str | None, path: str | None, what: str) -> str:
    """The text: `given`, or stdin when it is "-", or the file at `path`. A final newline
    (what `echo` and editors add) is not part of it."""
    if path is not None and given is not None:
        raise click.UsageError(f"give {what} or --file, not both")
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise PfarError(f"cannot read {what} from {path}: {exc.strerror}") from None
        return _decoded(data, path, what)
    if given == "-":
        return _decoded(sys.stdin.buffer.read(), "stdin", what)
    if given is None:
        raise click.UsageError(f"give {what}: as an argument, - to read stdin, or --file PATH")
    return given


def _decoded(data: bytes, source: str, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PfarError(
            f"{what} from {source} is not UTF-8 text (byte {exc.start}); nothing was sent"
        ) from None
    return text.removesuffix("\n").removesuffix("\r")
